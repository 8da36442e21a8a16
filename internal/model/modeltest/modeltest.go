// Package modeltest is the conformance suite every HTTP model provider runs:
// one set of cases, so OpenAI, Anthropic and any later provider map messages,
// tool calls, usage, errors, retries and cancellation the same way.
//
// The suite owns a local fake server (httptest, never the internet) and the
// script of its answers, written in neutral terms (Reply). The provider's
// test supplies a Harness that translates between those neutral terms and
// the provider's real wire format: it encodes a Reply as the provider's JSON
// and decodes what the provider sent back into a neutral Received.
package modeltest

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// Harness adapts one provider to the suite. Every field is required unless
// its comment says otherwise.
type Harness struct {
	// Path is where the provider posts on the server, e.g. "/v1/chat/completions".
	Path string
	// New builds the provider's model for the fake server at serverURL (the
	// server root, "http://127.0.0.1:port"), configured from o.
	New func(serverURL string, o Options) (model.Model, error)
	// EncodeReply returns the provider's success body for r (text, tool
	// calls with their ids and raw arguments, usage, stop reason), exactly
	// as the real API would send it, non-streaming.
	EncodeReply func(r Reply) ([]byte, error)
	// EncodeError returns the provider's error body for an HTTP status.
	EncodeError func(status int, message string) []byte
	// DecodeRequest reads the JSON body the provider sent into the neutral view.
	DecodeRequest func(body []byte) (Received, error)
	// Credential returns the API key the request carried in its headers.
	Credential func(h http.Header) string
	// TruncatedStop is the provider's stop reason for an answer cut off by
	// the output token limit ("length", "max_tokens").
	TruncatedStop string
	// WrongBaseURL is the base URL users get wrong for the server at
	// serverURL (no /v1 where one is needed, or /v1 where the client adds
	// it): the provider's 404 must then name the base URL.
	WrongBaseURL func(serverURL string) string
	// Reasoning says the provider returns reasoning blocks and must send
	// them back with their turn (Anthropic's thinking); optional.
	Reasoning bool
}

// Options is the neutral part of a provider's Config the suite sets.
type Options struct {
	APIKey string
	// Timeout bounds one HTTP attempt.
	Timeout time.Duration
	// MaxRetries: 0 means the provider's default, negative none.
	MaxRetries int
	// RetryDelay and MaxRetryDelay are the backoff; the suite keeps them tiny.
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	Logger        *slog.Logger
	// BaseURL, when set, replaces the base URL New derives from serverURL.
	BaseURL string
}

// Reply is one scripted answer of the fake server.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is added to the response (e.g. Retry-After, Content-Type).
	Header http.Header
	// Text, ToolCalls, Usage and StopReason make a success body. An empty
	// StopReason lets the harness pick the provider's usual word.
	Text       string
	ToolCalls  []model.ToolCall
	Usage      model.Usage
	StopReason string
	// Reasoning is sent before the text, for providers with Harness.Reasoning.
	Reasoning []model.Reasoning
	// ErrorMessage is the message of an error body (Status >= 400).
	ErrorMessage string
	// Body, when set, is sent verbatim instead of an encoded body.
	Body string
	// Delay holds the answer back; it ends early when the client goes away.
	Delay time.Duration
	// HangUp drops the connection without answering.
	HangUp bool
}

// Received is the neutral view of one request the provider sent.
type Received struct {
	Model string
	// System is the system prompt; several are joined with "\n\n".
	System string
	// Messages is the conversation without system messages, tool results
	// one message each. ToolName is not compared: no wire format carries it.
	Messages []model.Message
	// Tools is nil when the request has no "tools" field and empty when it
	// has an empty list (which the real APIs refuse).
	Tools []model.ToolSchema
	// ParallelToolCalls is whether the request allowed several tool calls
	// in one answer, nil when it did not say.
	ParallelToolCalls *bool
	// MaxTokens is the output limit sent, under whatever name; 0 if none.
	MaxTokens int64
	// Params holds every other top-level field, JSON-decoded (temperature, ...).
	Params map[string]any
	// APIKey is what Harness.Credential found; set by the suite.
	APIKey string `json:"-"`
	// Header is the request's headers; set by the suite.
	Header http.Header `json:"-"`
}

// JSON reads a JSON value for harnesses decoding requests; it keeps numbers as float64.
func JSON(raw json.RawMessage) any {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}
