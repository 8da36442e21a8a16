// Package quotaserver is a local model provider with a quota: a real HTTP
// server on loopback that speaks OpenAI's Chat Completions or Anthropic's
// Messages API, answers deterministically, and refuses requests with 429 the
// way real providers do when their limits are reached.
//
// It exists so that what happens between Formica and a rate-limited
// provider (pacing, retries, Retry-After and rate-limit headers, streaming,
// stalled connections) can be exercised end to end, through the official
// SDKs and the real HTTP stack, by integration tests and by `formica bench`,
// without a network or credentials. It does not import "testing".
//
// # Quota
//
// Each accepted request takes one token from a request bucket (capacity
// Config.Burst, refilled at RequestsPerMinute/60 per second) and, when
// Config.TokensPerMinute is set, its estimated input tokens (body bytes / 4)
// from a token bucket. Config.MaxInFlight bounds the requests answered at
// once. A request that finds no room is answered 429 at once, in the
// provider's error shape, with the signals Config.Signals chooses: the
// provider's rate-limit headers, only Retry-After, or nothing.
//
// # Answers
//
// DefaultReply plays a model just able to drive an agent fan-out: a root
// whose task is "fanout N" and which is offered the "agent" tool calls it N
// times; each helper answers "done: <task>"; the root, given the results,
// answers "collected K results, D done". Config.Respond replaces it.
//
// A request with "stream": true is answered with server-sent events in the
// provider's format, tool calls included, so the SDKs' accumulators rebuild
// the message; otherwise with the provider's JSON body. An accepted answer
// takes Config.Latency (a stream sends its first event at once and its last
// at Latency), plus Config.StreamFor of filler text when set; with
// Config.StallAfter it stops sending midway and holds the connection open,
// as a hung provider does.
package quotaserver
