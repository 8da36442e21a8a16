// Package modeltest is the conformance suite every HTTP model provider runs:
// one set of cases, so OpenAI, Anthropic and any later provider map messages,
// tool calls, usage, errors, retries and cancellation the same way.
//
// The suite owns a local fake server (httptest, never the internet) and the
// script of its answers, written in neutral terms (Reply). The provider's
// test supplies a Harness that translates between those neutral terms and
// the provider's real wire format: it encodes a Reply as the provider's
// server-sent events (or, for servers that ignore stream, its JSON) and
// decodes what the provider sent back into a neutral Received.
//
// The fake server is stream-only: it answers 400 to a request that does not
// ask for a stream, as some hosted gateways do.
package modeltest

import (
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/internal/httpconf"
)

// Harness adapts one provider to the suite. Every field is required unless
// its comment says otherwise.
type Harness struct {
	// Path is where the provider posts on the server, e.g. "/v1/chat/completions".
	Path string
	// New builds the provider's model for the fake server at serverURL (the
	// server root, "http://127.0.0.1:port"), configured from o.
	New func(serverURL string, o Options) (model.Model, error)
	// EncodeStream returns the events of the provider's streamed answer r
	// (text, tool calls with their ids and raw arguments, reasoning, usage,
	// stop reason), exactly as the real API streams them for req: text and
	// arguments cut in pieces (Split), down to the final event. req is
	// there for APIs whose stream depends on the request (OpenAI sends the
	// usage only when stream_options asks for it).
	EncodeStream func(r Reply, req Received) ([]Event, error)
	// EncodeStreamError returns the error event the provider sends when it
	// fails mid-stream (an overload), with message.
	EncodeStreamError func(message string) Event
	// EncodeReply returns the provider's success body for r as one JSON
	// object, as the real API answers a request that does not stream.
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

// Event is one server-sent event.
type Event struct {
	// Name is the event's type ("event:" line), empty for none.
	Name string
	// Data is the event's data, one line.
	Data string
}

// Options is the Config every HTTP provider takes; the suite sets the
// key, idle timeout, gate, retries and logger, and BaseURL only to replace
// the base URL New derives from serverURL.
type Options = httpconf.Config

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
	// JSON answers with one JSON object (EncodeReply) instead of a stream,
	// as local servers that ignore stream do.
	JSON bool
	// Delay holds the answer back; it ends early when the client goes away.
	Delay time.Duration
	// HangUp drops the connection without answering.
	HangUp bool
	// Pace spaces the events of a streamed answer.
	Pace time.Duration
	// Events, when positive, sends only the first Events events of the
	// stream; then the server stalls (Stall: keeps the connection open and
	// silent until the client goes away), sends an error event
	// (StreamError, its message) or ends the body cleanly, as a connection
	// cut between two events.
	Events      int
	Stall       bool
	StreamError string
}

// Split cuts s into the pieces a server streams it in: a piece ends after
// each space and holds at most 8 bytes, never splitting a character.
func Split(s string) []string {
	var out []string
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			if n > 0 && n+size > 8 {
				break
			}
			n += size
			if r == ' ' {
				break
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
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
