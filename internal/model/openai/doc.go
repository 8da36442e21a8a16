// Package openai is a model.Model over the Chat Completions API, through the
// official openai-go SDK. It speaks to OpenAI and to every server that copies
// that API (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter): point BaseURL at
// the server; the key may then be empty.
//
// The SDK builds and decodes the wire JSON; this package owns everything a
// long agent run depends on and which must behave the same for every provider:
//
//   - Retries. The SDK's own retries are off. 429 and 5xx answers, transport
//     failures and attempts that exceed Config.Timeout are retried by
//     model.Retry with exponential backoff and jitter, honouring Retry-After,
//     at most Config.MaxRetries times and never past ctx.
//   - Errors. Every failure wraps a model sentinel (ErrUnauthorized,
//     ErrRateLimited, ErrServer, ErrBadRequest, ErrBadResponse) or ctx's
//     error, classified from the HTTP status the server really sent.
//   - Secrets. The key only ever travels in the Authorization header: it is
//     scrubbed from error messages (servers echo keys back in 401 bodies) and
//     never logged. The SDK is built without its environment defaults, so a
//     key from OPENAI_API_KEY cannot leak to a BaseURL it was not meant for.
package openai
