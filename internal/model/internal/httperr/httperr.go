// Package httperr makes the HTTP attempts of a model provider's SDK (gated,
// under an idle timeout) and turns a failed one into an error wrapping a
// model sentinel or ctx's error. Failures are classified from
// what the server really answered (status, Retry-After, error body), which an
// Exchange captures, rather than from each SDK's error types: so every
// provider shares one logic, keeps the server's own message (the SDK errors
// drop it or add the URL and raw body) and reads Retry-After, whose SDK
// parsing is internal.
package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// Endpoint is how one provider's attempts are made and their failures
// classified. The zero value of Secret means there is no key to redact.
type Endpoint struct {
	// Provider starts every error, e.g. "openai".
	Provider string
	// Secret is the API key, redacted from every message.
	Secret string
	// IdleTimeout fails an attempt that receives no byte for this long,
	// waiting for the response headers or between body bytes; zero for
	// none. Only silence fails an attempt: a long answer that keeps
	// streaming is never cut, however long it takes.
	IdleTimeout time.Duration
	// Gate, when set, paces every attempt (see model.Gate).
	Gate model.Gate
	// NotFoundHint, when set, is added to a 404's error: what about the
	// configured base URL likely sent the request to a path the server lacks.
	NotFoundHint string
}

// errStalled is the cause an attempt's context is cancelled with when the
// idle timeout passes.
var errStalled = errors.New("no bytes from the provider within the idle timeout")

// ErrStreamCut is returned by a provider's send when a 2xx stream ended
// without its final event: the connection was cut cleanly mid-answer, and
// the answer must not pass for complete. It is retried as a server error.
var ErrStreamCut = errors.New("stream ended before its final event")

// EventError is an error event a stream carried after a 2xx status: the
// server failed mid-answer. Data is the event's JSON, in the provider's
// error format.
type EventError struct {
	Data []byte
}

func (e *EventError) Error() string { return "error event in the stream: " + message(e.Data) }

// Attempt makes one call: it takes a ticket from e.Gate (when set) for ask,
// runs send under e.IdleTimeout and gives the ticket back with what the
// server answered. send must install x.Middleware on its SDK request, use
// ctx, read the whole answer before it returns and report the answer's
// usage with x.SetUsage. A failure comes back as an error wrapping ctx's
// error or a model sentinel, keys redacted, with the wait the server asked
// for (Retry-After): the shape model.Retry calls for.
func Attempt[T any](ctx context.Context, e Endpoint, ask model.Ask, send func(ctx context.Context, x *Exchange) (T, error)) (_ T, _ time.Duration, err error) {
	var zero T
	var x Exchange
	if e.Gate != nil {
		ticket, terr := e.Gate.Take(ctx, ask)
		if terr != nil {
			if ctx.Err() != nil {
				return zero, 0, e.ctxError(ctx)
			}
			return zero, 0, fmt.Errorf("%s: quota gate: %w", e.Provider, terr)
		}
		// Deferred first, so it runs last: after the body is closed.
		defer func() { ticket.Done(x.outcome(err == nil)) }()
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if e.IdleTimeout > 0 {
		idle := time.AfterFunc(e.IdleTimeout, func() { cancel(errStalled) })
		defer idle.Stop()
		x.kick = func() { idle.Reset(e.IdleTimeout) }
	}
	out, err := send(actx, &x)
	if err == nil {
		return out, 0, nil
	}
	return zero, x.retryAfter(), e.classify(ctx, actx, err, &x)
}

// classify turns a failed attempt into an error wrapping ctx's error or a
// model sentinel: by HTTP status (model.StatusError) with the server's
// message; ErrServer for a stalled attempt, a broken connection or a cut
// stream; by its type for an error event in a stream; ErrBadResponse for a
// 2xx body that does not decode. ctx is the caller's, actx the attempt's
// (with the idle timeout).
func (e Endpoint) classify(ctx, actx context.Context, err error, x *Exchange) error {
	if ctx.Err() != nil {
		return e.ctxError(ctx)
	}
	if x.status >= 400 {
		msg := e.redact(message(x.body))
		if x.status == 404 && e.NotFoundHint != "" {
			msg = strings.TrimSpace(msg + " (" + e.NotFoundHint + ")")
		}
		return model.StatusError(e.Provider, x.status, msg)
	}
	if errors.Is(context.Cause(actx), errStalled) {
		if x.status == 0 {
			return fmt.Errorf("%s: %w: stalled: no response for %s", e.Provider, model.ErrServer, e.IdleTimeout)
		}
		return fmt.Errorf("%s: %w: stream stalled: no bytes for %s", e.Provider, model.ErrServer, e.IdleTimeout)
	}
	var ev *EventError
	if errors.As(err, &ev) {
		return fmt.Errorf("%s: %w: %s", e.Provider, eventKind(ev.Data), e.redact(ev.Error()))
	}
	if errors.Is(err, ErrStreamCut) {
		return fmt.Errorf("%s: %w: %w", e.Provider, model.ErrServer, ErrStreamCut)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || x.readErr != nil {
		return fmt.Errorf("%s: %w: %s", e.Provider, model.ErrServer, e.redact(err.Error()))
	}
	if x.status >= 200 && x.status < 300 {
		return fmt.Errorf("%s: %w: %s", e.Provider, model.ErrBadResponse, e.redact(err.Error()))
	}
	return fmt.Errorf("%s: %s", e.Provider, e.redact(err.Error()))
}

// eventKind classifies an error event by its error's type or code, as both
// APIs name them ("rate_limit_error", "rate_limit_exceeded",
// "invalid_request_error", "overloaded_error", "server_error"): a server
// failure unless it says otherwise.
func eventKind(data []byte) error {
	var env struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &env)
	kind := env.Error.Type + " " + fmt.Sprint(env.Error.Code)
	switch {
	case strings.Contains(kind, "rate_limit"):
		return model.ErrRateLimited
	case strings.Contains(kind, "invalid_request"):
		return model.ErrBadRequest
	}
	return model.ErrServer
}

// BaseURLHint is the NotFoundHint for a base URL: env names the variable
// that sets it, and wantV1 says whether the API root includes "/v1"
// (OpenAI-style servers) or the client adds it (Anthropic). Empty when the
// URL has the expected shape.
func BaseURLHint(env, base string, wantV1 bool) string {
	path := strings.TrimRight(base, "/")
	if i := strings.Index(path, "://"); i >= 0 {
		path = path[i+3:]
	}
	if i := strings.Index(path, "/"); i >= 0 {
		path = path[i:]
	} else {
		path = ""
	}
	hasV1 := strings.HasSuffix(path, "/v1")
	switch {
	case wantV1 && strings.HasSuffix(path, "/v1/v1"):
		return fmt.Sprintf("%s %s has /v1 twice; it should end in one /v1", env, base)
	case wantV1 && !hasV1:
		return fmt.Sprintf("%s %s does not end in /v1, which such servers usually need: try %s/v1", env, base, strings.TrimRight(base, "/"))
	case !wantV1 && hasV1:
		return fmt.Sprintf("%s %s ends in /v1, and the client adds /v1 itself, so requests go to %s/v1/...: leave /v1 out", env, base, strings.TrimRight(base, "/"))
	}
	return ""
}

// ctxError wraps ctx's error and, when it differs, its cause, so both
// errors.Is(err, context.Canceled) and errors.Is(err, cause) hold.
func (e Endpoint) ctxError(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%s: %w: %w", e.Provider, ctx.Err(), cause)
	}
	return fmt.Errorf("%s: %w", e.Provider, ctx.Err())
}

// message extracts the human part of an error body: {"error":{"message":...}}
// (OpenAI; Anthropic, whose error object also has a type), {"error":"..."}
// (Ollama, gateways) or {"message":...}; otherwise the start of the body.
func message(body []byte) string {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &env) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var flat string
		switch {
		case json.Unmarshal(env.Error, &nested) == nil && nested.Message != "":
			return clip(nested.Message)
		case json.Unmarshal(env.Error, &flat) == nil && flat != "":
			return clip(flat)
		case env.Message != "":
			return clip(env.Message)
		}
	}
	return clip(string(body))
}

// clip collapses white space and keeps the first 300 bytes.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// keyLike matches API-key-shaped tokens, which servers echo in 401 messages
// (partly masked, but still more than should reach a log).
var keyLike = regexp.MustCompile(`\b(sk|rk|pk)-[A-Za-z0-9_*.\-]{6,}`)

// redact removes the configured key and anything shaped like a key. A key
// shorter than minBareSecret (a local server's "x", say) is removed only
// where it stands as a token of its own: replaced inside words, it would
// garble every message that holds its letters.
func (e Endpoint) redact(s string) string {
	switch {
	case len(e.Secret) >= minBareSecret:
		s = strings.ReplaceAll(s, e.Secret, "[redacted]")
	case e.Secret != "":
		s = replaceToken(s, e.Secret, "[redacted]")
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}

// minBareSecret is the length from which a key is removed wherever it
// appears.
const minBareSecret = 8

// replaceToken replaces tok in s where it stands as a token of its own:
// no letter, digit, '_' or '-' next to it.
func replaceToken(s, tok, with string) string {
	var b strings.Builder
	from := 0
	for {
		i := strings.Index(s[from:], tok)
		if i < 0 {
			b.WriteString(s[from:])
			return b.String()
		}
		i += from
		end := i + len(tok)
		b.WriteString(s[from:i])
		if (i == 0 || !tokenByte(s[i-1])) && (end == len(s) || !tokenByte(s[end])) {
			b.WriteString(with)
		} else {
			b.WriteString(tok)
		}
		from = end
	}
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// AskFor is what every attempt of req asks of its endpoint's quota: the
// run and thread ctx names (model.WithCaller) and req's token estimate.
func AskFor(ctx context.Context, req model.Request) model.Ask {
	c := model.CallerFrom(ctx)
	in, out := model.EstimateTokens(req)
	return model.Ask{Run: c.Run, Thread: c.Thread, InputTokens: in, OutputTokens: out}
}
