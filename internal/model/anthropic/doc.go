// Package anthropic is a model.Model over Anthropic's Messages API, through
// the official anthropic-sdk-go.
//
// The Messages API differs from Chat Completions in ways this package hides:
// system messages go to the top-level system parameter; assistant tool calls
// are tool_use blocks; tool results are tool_result blocks inside a user
// message (consecutive results, and a user message right after them, share
// one user turn); max_tokens is required (default DefaultMaxTokens).
//
// Retries, error classification and key hygiene match package openai: the
// SDK's own retries are off; 429, 5xx (including 529 "overloaded"),
// transport failures and timed-out attempts are retried by model.Retry with
// exponential backoff and jitter, honouring Retry-After, at most
// Config.MaxRetries times and never past ctx; every failure wraps a model
// sentinel or ctx's error; the key travels only in the x-api-key header and
// is scrubbed from errors. The SDK is built without its environment defaults
// (ANTHROPIC_* variables, profiles), so only Config reaches the wire.
package anthropic
