// Package openai is a model.Model over the Chat Completions API, through the
// official openai-go SDK. It speaks to OpenAI and to every server that copies
// that API (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter): point BaseURL at
// the server; the key may then be empty.
//
// The SDK builds the wire JSON and decodes the stream; this package owns
// everything a long agent run depends on and which must behave the same for
// every provider:
//
//   - Streaming. Every request streams (stream: true, with
//     stream_options.include_usage so that the final chunk carries the
//     usage). The SDK's accumulator puts the chunks back into one
//     completion, mapped exactly as a non-streamed one: tool calls with
//     their raw arguments, refusals, finish reasons, and ErrTruncated for
//     finish_reason "length" with neither text nor tool call. A stream that
//     ends before a finish_reason was cut and is retried; an error event
//     mid-stream is classified by its type (a server error unless it says
//     rate limit or invalid request). A server that answers with one JSON
//     object instead (Content-Type application/json) is understood too.
//   - Idle timeout. An attempt fails when no byte arrives for
//     Config.IdleTimeout, waiting for the answer or mid-stream, with an
//     ErrServer that says it stalled. An answer that keeps streaming is
//     never cut, however long it takes: ctx alone bounds the whole call.
//   - Gate. With Config.Gate, every HTTP attempt takes a ticket before it
//     is sent and gives it back with the status, headers and usage, so one
//     gate paces every caller of the endpoint (see model.Gate).
//   - Retries. The SDK's own retries are off. model.Retry retries 5xx
//     answers, transport failures, stalls and cut streams with exponential
//     backoff and jitter, honouring Retry-After, at most Config.MaxRetries
//     times and never past ctx. A 429 is not a failure while the provider
//     says retry: it is retried for as long as ctx allows, without counting
//     against MaxRetries, after the provider's Retry-After (or the backoff),
//     or at once with a gate, which holds the attempt back itself. A
//     Retry-After beyond model.MaxRetryAfter, or past ctx's deadline, ends
//     the call with the 429.
//   - Errors. Every failure wraps a model sentinel (ErrUnauthorized,
//     ErrRateLimited, ErrServer, ErrBadRequest, ErrBadResponse) or ctx's
//     error, classified from the HTTP status the server really sent.
//   - Secrets. The key only ever travels in the Authorization header: it is
//     scrubbed from error messages (servers echo keys back in 401 bodies) and
//     never logged. The SDK is built without its environment defaults, so a
//     key from OPENAI_API_KEY cannot leak to a BaseURL it was not meant for.
package openai
