// Package anthropic is a model.Model over Anthropic's Messages API, through
// the official anthropic-sdk-go.
//
// The Messages API differs from Chat Completions in ways this package hides:
// system messages go to the top-level system parameter; assistant tool calls
// are tool_use blocks; tool results are tool_result blocks inside a user
// message (consecutive results, and a user message right after them, share
// one user turn); max_tokens is required (default DefaultMaxTokens).
//
// Every request streams. The SDK's Message.Accumulate puts the events back
// into one message, mapped exactly as a non-streamed one: text, tool_use
// blocks with their input as sent, thinking blocks with their signatures
// and redacted thinking (kept as Reasoning, to go back with the turn), the
// usage from message_start and message_delta, and ErrTruncated for
// stop_reason max_tokens with neither text nor tool call. A stream that
// ends without message_stop was cut and is retried; an error event
// mid-stream (overloaded_error) is a server error, retried. A gateway that
// answers with one JSON object instead is understood too.
//
// Idle timeout, gate, retries, error classification and key hygiene match
// package openai: an attempt fails, as a server error saying it stalled,
// when no byte arrives for Config.IdleTimeout (the API's pings keep a
// thinking model's stream alive), and ctx alone bounds a whole call; with
// Config.Gate every HTTP attempt takes a ticket and gives it back with
// the status, headers (anthropic-ratelimit-*) and usage; the SDK's own
// retries are off; 5xx (including 529 "overloaded"), transport failures,
// stalls and cut streams are retried by model.Retry with exponential
// backoff and jitter, honouring Retry-After, at most Config.MaxRetries
// times and never past ctx; 429s are retried without counting against
// MaxRetries for as long as ctx allows (at once with a gate, which holds
// them back itself), unless Retry-After passes model.MaxRetryAfter or
// ctx's deadline; every failure wraps a model sentinel or ctx's error; the
// key travels only in the x-api-key header and is scrubbed from errors. The
// SDK is built without its environment defaults (ANTHROPIC_* variables,
// profiles), so only Config reaches the wire.
package anthropic
