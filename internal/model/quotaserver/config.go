package quotaserver

import (
	"cmp"
	"fmt"
	"time"
)

// Format is the provider API the server speaks.
type Format string

const (
	// OpenAI is Chat Completions: POST /v1/chat/completions.
	OpenAI Format = "openai"
	// Anthropic is Messages: POST /v1/messages.
	Anthropic Format = "anthropic"
)

// Signals chooses what a server tells its clients about the quota, because
// real providers differ and a client must cope with each.
type Signals string

const (
	// SignalHeaders sends the provider's rate-limit headers on every 200 and
	// 429 answer, and Retry-After on 429s. OpenAI's are
	// x-ratelimit-{limit,remaining,reset}-requests (reset as a Go-like
	// duration such as "1s" or "6m0s") and the -tokens variants;
	// Anthropic's are anthropic-ratelimit-requests-{limit,remaining,reset}
	// (reset as an RFC 3339 time) and the tokens and input-tokens variants.
	// Token headers are sent only when TokensPerMinute is set, request
	// headers only when RequestsPerMinute is.
	SignalHeaders Signals = "headers"
	// SignalRetryAfter sends only Retry-After on 429s, in whole seconds
	// rounded up and at least 1, as many servers do; nothing on 200s.
	SignalRetryAfter Signals = "retry-after"
	// SignalBare sends 429s with no quota header at all, so a client must
	// find its own pace.
	SignalBare Signals = "bare"
)

// Config describes the provider a Server plays. The zero value of every
// field means off or its default: the zero Config is an OpenAI server
// without limits that answers at once.
type Config struct {
	// Format is the API spoken; default OpenAI.
	Format Format

	// RequestsPerMinute refills the request bucket; 0 means no request limit.
	RequestsPerMinute int
	// Burst is the request bucket's capacity, which it starts with: how
	// many requests may arrive at once. Default RequestsPerMinute, as real
	// providers replenish a full minute's quota continuously; ignored
	// without RequestsPerMinute.
	Burst int
	// TokensPerMinute, when set, is a second bucket of that capacity and
	// refill rate, charged with each request's input tokens (body bytes / 4;
	// a request above the capacity needs a full bucket).
	TokensPerMinute int
	// MaxInFlight bounds the requests being answered at once; one more is
	// refused with 429 without charging the buckets. 0 means no bound.
	MaxInFlight int

	// Latency is how long each accepted answer takes in total. A stream
	// sends its first event at once and spreads the rest over Latency.
	Latency time.Duration
	// StreamFor, when set, makes every answer longer: after its content, a
	// filler piece of text (".") every ChunkEvery for StreamFor. The filler
	// is part of the answer's text, streamed or not, and the answer takes
	// Latency + StreamFor.
	StreamFor time.Duration
	// ChunkEvery spaces the filler pieces; default 100ms.
	ChunkEvery time.Duration
	// StallAfter, when set, stops an answer after that many server-sent
	// events (a JSON answer: after its status and headers) and keeps the
	// connection open, sending nothing, until the client goes away or the
	// server closes: a hung provider, for idle-timeout tests.
	StallAfter int

	// Signals is what 429s and 200s say about the quota; default SignalHeaders.
	Signals Signals
	// StreamOnly refuses, with 400, a request without "stream": true, so a
	// test proves its client streams.
	StreamOnly bool

	// Respond, when set, decides each answer instead of DefaultReply. It is
	// called concurrently.
	Respond func(Request) Reply
}

// check validates cfg and fills in the defaults.
func (cfg Config) check() (Config, error) {
	switch cfg.Format {
	case "":
		cfg.Format = OpenAI
	case OpenAI, Anthropic:
	default:
		return cfg, fmt.Errorf("quotaserver: unknown format %q (want %q or %q)", cfg.Format, OpenAI, Anthropic)
	}
	switch cfg.Signals {
	case "":
		cfg.Signals = SignalHeaders
	case SignalHeaders, SignalRetryAfter, SignalBare:
	default:
		return cfg, fmt.Errorf("quotaserver: unknown signals %q (want %q, %q or %q)",
			cfg.Signals, SignalHeaders, SignalRetryAfter, SignalBare)
	}
	if cfg.RequestsPerMinute < 0 || cfg.Burst < 0 || cfg.TokensPerMinute < 0 || cfg.MaxInFlight < 0 ||
		cfg.Latency < 0 || cfg.StreamFor < 0 || cfg.ChunkEvery < 0 || cfg.StallAfter < 0 {
		return cfg, fmt.Errorf("quotaserver: negative limit or duration in config")
	}
	cfg.Burst = cmp.Or(cfg.Burst, cfg.RequestsPerMinute)
	cfg.ChunkEvery = cmp.Or(cfg.ChunkEvery, 100*time.Millisecond)
	if cfg.Respond == nil {
		cfg.Respond = DefaultReply
	}
	return cfg, nil
}

// Request is what a server understood of a request, the same for both formats.
type Request struct {
	Format Format
	Model  string
	// Messages is the conversation in order. Anthropic's system parameter
	// comes first as a "system" message, and its tool_result blocks become
	// "tool" messages, as in Chat Completions.
	Messages []Message
	// Tools names the tools offered.
	Tools []string
	// Stream is whether the client asked for server-sent events.
	Stream bool
	// InputTokens is the estimate charged and reported: body bytes / 4.
	InputTokens int

	// includeUsage is Chat Completions' stream_options.include_usage: the
	// stream ends with a usage chunk.
	includeUsage bool
}

// Message is one message of a conversation.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string
	// Content is the message's text, its text parts joined.
	Content string
	// ToolCalls are an assistant message's calls.
	ToolCalls []ToolCall
	// ToolCallID links a "tool" message to the call it answers.
	ToolCallID string
}

// ToolCall is one call of a tool.
type ToolCall struct {
	ID, Name string
	// Arguments is the arguments' JSON text, an object.
	Arguments string
}

// Reply is a model's answer: text, tool calls, or both.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
}

// Stats counts what a server saw since it started or was last Reset.
// Requests = Accepted + Refused + BadRequests, but for requests still being
// read.
type Stats struct {
	// Requests is every HTTP request received.
	Requests int
	// Accepted is the requests answered 200 (including those still running).
	Accepted int
	// Refused is the requests answered 429: RefusedRate + RefusedInFlight.
	Refused int
	// RefusedRate is the 429s for an empty request or token bucket.
	RefusedRate int
	// RefusedInFlight is the 429s for MaxInFlight.
	RefusedInFlight int
	// BadRequests is the 400s and 404s: undecodable bodies, wrong paths,
	// non-streaming requests under StreamOnly.
	BadRequests int
	// InFlight is the requests being answered now; MaxInFlight the most seen.
	InFlight, MaxInFlight int
	// First and Last are when the first and the latest request arrived.
	First, Last time.Time
}

// FanoutIdeal is the least time a fan-out of n helpers can take against
// this quota, as DefaultReply plays it: n+2 calls (the root's first, the
// helpers', the root's last) as the bucket allows them after its burst,
// and three answers in sequence (the root's, one helper's, the root's).
func (cfg Config) FanoutIdeal(n int) time.Duration {
	var pace time.Duration
	if cfg.RequestsPerMinute > 0 {
		pace = time.Minute / time.Duration(cfg.RequestsPerMinute)
	}
	return time.Duration(max(n+2-cfg.Burst, 0))*pace + 3*cfg.Latency
}
