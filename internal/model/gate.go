package model

import (
	"context"
	"net/http"
	"time"
)

// Gate paces the attempts of one endpoint's calls against its quota: every
// HTTP attempt takes a Ticket before it is sent and gives it back with what
// the provider answered, so the gate can learn the quota from the answers
// and share it between every caller of the endpoint (on one worker or, over
// the coordinator, the whole cluster).
//
// Take blocks while the quota has no room; it queues callers fairly (by
// run, then by thread, first come first served within a thread) and
// returns ctx's error when ctx ends first.
type Gate interface {
	Take(ctx context.Context, ask Ask) (Ticket, error)
}

// Ask is what one attempt needs of its endpoint's quota.
type Ask struct {
	// Run and Thread order waiting calls fairly; empty for a call made
	// outside any run.
	Run, Thread string
	// InputTokens and OutputTokens estimate the attempt's tokens
	// (EstimateTokens): the gate reserves them against tokens-per-minute
	// limits and corrects the reservation by the usage the answer reports.
	InputTokens, OutputTokens int64
}

// Ticket is one attempt's share of the quota; Done gives back its place in
// flight and tells the gate what the provider answered. Done is called once.
type Ticket interface {
	Done(Outcome)
}

// Outcome is what the provider answered one attempt.
type Outcome struct {
	// Status is the HTTP status, 0 when no answer came (a broken
	// connection, a timeout, a cancel).
	Status int
	// Header holds the answer's headers: the provider's rate-limit signals
	// (x-ratelimit-*, anthropic-ratelimit-*, retry-after).
	Header http.Header
	// Usage is the tokens the answer reported, zero when it reported none.
	Usage Usage
	// At is when the answer's headers arrived (zero: when Done is called).
	At time.Time
}

// Refused reports whether the provider refused the attempt for quota.
func (o Outcome) Refused() bool { return o.Status == http.StatusTooManyRequests }

// Caller names the run and thread a model call is made for.
type Caller struct {
	Run, Thread string
}

type callerKey struct{}

// WithCaller returns ctx naming the run and thread its model calls serve,
// so a Gate can queue them fairly.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller WithCaller put in ctx, or the zero Caller.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// QuotaNotice hears when a call starts waiting for its endpoint's quota and
// when it goes on: the runner reports the wait (event model.waiting) and a
// worker lends the thread's slot out meanwhile.
type QuotaNotice interface {
	// Waiting is called once a call has to wait; reason says why (for
	// example "requests per minute", "calls in flight", "provider asked to
	// retry after 2s").
	Waiting(ctx context.Context, endpoint, reason string)
	// Resumed is called when the waiting call got its share; it may block
	// (to take a slot back) and returns ctx's error if ctx ends first.
	Resumed(ctx context.Context) error
}

type quotaNoticeKey struct{}

// WithQuotaNotice returns ctx carrying n for the gates of its model calls.
func WithQuotaNotice(ctx context.Context, n QuotaNotice) context.Context {
	return context.WithValue(ctx, quotaNoticeKey{}, n)
}

// QuotaNoticeFrom returns the QuotaNotice in ctx, or nil.
func QuotaNoticeFrom(ctx context.Context) QuotaNotice {
	n, _ := ctx.Value(quotaNoticeKey{}).(QuotaNotice)
	return n
}

// EstimateTokens estimates a request's input tokens (about four bytes of
// text a token, the common rule for English and code, plus a few tokens a
// message) and its output tokens (max_tokens when set, else a default), for
// a gate's reservation before the provider reports the real figures.
func EstimateTokens(req Request) (in, out int64) {
	var bytes int
	for _, m := range req.Messages {
		bytes += len(m.Content) + 16
		for _, c := range m.ToolCalls {
			bytes += len(c.Name) + len(c.Arguments) + 16
		}
		for _, r := range m.Reasoning {
			bytes += len(r.Text) + len(r.Redacted)
		}
	}
	for _, t := range req.Tools {
		bytes += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	in = int64(bytes/4) + 1
	out = DefaultOutputEstimate
	if n, ok := req.Args.MaxTokens(); ok && n > 0 {
		out = n
	}
	return in, out
}

// DefaultOutputEstimate is the output a call is assumed to take when its
// request sets no max_tokens.
const DefaultOutputEstimate = 1024
