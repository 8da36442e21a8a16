package model

import (
	"context"
	"encoding/json"
)

// Model produces the next assistant turn of a conversation.
//
// Implementations must be safe for concurrent use: helpers of one run share a
// model value and call it from many goroutines.
type Model interface {
	Generate(ctx context.Context, req Request) (Response, error)
}

// Role is the author of a message.
type Role string

// The four roles a conversation holds.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation.
type Message struct {
	Role    Role   `json:"role" msgpack:"role"`
	Content string `json:"content,omitempty" msgpack:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty" msgpack:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty" msgpack:"tool_call_id,omitempty"`
	// ToolName is the name of the tool a tool message answers for; some
	// providers need it alongside the call id.
	ToolName string `json:"tool_name,omitempty" msgpack:"tool_name,omitempty"`
	// Reasoning is the provider's reasoning that came with an assistant
	// turn (Anthropic's thinking blocks), sent back unchanged with that
	// turn, as such APIs require when tools are in use.
	Reasoning []Reasoning `json:"reasoning,omitempty" msgpack:"reasoning,omitempty"`
}

// Reasoning is one block of a model's reasoning as its provider returned
// it: the text with its signature, or, redacted, only opaque data.
type Reasoning struct {
	Text      string `json:"text,omitempty" msgpack:"text,omitempty"`
	Signature string `json:"signature,omitempty" msgpack:"signature,omitempty"`
	// Redacted is the opaque data of a redacted block (Text empty).
	Redacted string `json:"redacted,omitempty" msgpack:"redacted,omitempty"`
}

// ToolCall is one tool invocation asked for by the model.
type ToolCall struct {
	ID   string `json:"id" msgpack:"id"`
	Name string `json:"name" msgpack:"name"`
	// Arguments is the raw JSON text the model produced; it may be invalid and
	// is validated by the tool, never by the provider.
	Arguments string `json:"arguments" msgpack:"arguments"`
}

// ToolSchema describes a tool to the model.
type ToolSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	// Model is the provider's model name (the part of the reference after the colon).
	Model    string
	Messages []Message
	Tools    []ToolSchema
	Args     Args
	// ParallelToolCalls tells providers that support it whether the model may ask
	// for several tool calls in one response.
	ParallelToolCalls bool
	// CacheKey names the conversation for providers that route requests to
	// their prompt cache by a key (OpenAI's prompt_cache_key): the runner
	// sets the thread's id, so one thread's calls, each extending the
	// previous, land where its prefix is cached. Empty: none is sent.
	CacheKey string
}

// Response is the model's turn: final text, tool calls, or both.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// StopReason is the provider's own word for why the turn ended, for logs.
	StopReason string
	// ID is the provider's id of the response, and Model the model that
	// answered as the provider names it (for traces); either may be empty.
	ID, Model string
	// Reasoning goes back with this turn in the next request (see Message).
	Reasoning []Reasoning
}

// Usage counts a model call's tokens, or the sum of several calls'.
//
// InputTokens is the whole prompt the provider read, cached or not: for
// OpenAI-compatible servers their prompt_tokens (which include cached
// tokens); for Anthropic, whose input_tokens leaves cache reads and writes
// out, input_tokens + cache_read_input_tokens +
// cache_creation_input_tokens. CacheReadTokens and CacheWriteTokens are the
// parts of InputTokens read from and written to the provider's prompt
// cache (cached_tokens and, where a server reports it, cache_write_tokens
// under OpenAI's prompt_tokens_details). Token budgets count InputTokens +
// OutputTokens, cached input included: every token the provider bills for,
// whatever its price.
//
// CostUSD is what the calls cost in US dollars at the prices of the
// process that made them (internal/pricing); Priced counts the calls it
// sums and Unpriced those it leaves out because their model had no price.
// A sum's cost is known only when every call that counted tokens was
// priced (Cost).
type Usage struct {
	InputTokens      int64 `json:"input_tokens" msgpack:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens" msgpack:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty" msgpack:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty" msgpack:"cache_write_tokens,omitempty"`
	// CostUSD sums the cost of the priced calls.
	CostUSD float64 `json:"cost_usd,omitempty" msgpack:"cost_usd,omitempty"`
	// Priced counts the calls CostUSD sums.
	Priced int64 `json:"priced_calls,omitempty" msgpack:"priced_calls,omitempty"`
	// Unpriced counts the calls of a model with no price.
	Unpriced int64 `json:"unpriced_calls,omitempty" msgpack:"unpriced_calls,omitempty"`
}

// IsZero reports whether u counts no tokens: msgpack's omitempty leaves a
// zero usage out only through it (journal entries).
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + o.InputTokens,
		OutputTokens:     u.OutputTokens + o.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
		CostUSD:          u.CostUSD + o.CostUSD,
		Priced:           u.Priced + o.Priced,
		Unpriced:         u.Unpriced + o.Unpriced,
	}
}

// Cost is the cost of the calls u counts in US dollars, nil when one of
// them had no price, or when u counts tokens of no priced call (a usage
// recorded before calls were priced). A usage of no call costs 0.
func (u Usage) Cost() *float64 {
	if u.Unpriced > 0 || (u.Priced == 0 && u.InputTokens+u.OutputTokens > 0) {
		return nil
	}
	c := u.CostUSD
	return &c
}
