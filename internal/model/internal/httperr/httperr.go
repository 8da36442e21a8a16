// Package httperr turns a failed call of an HTTP model provider's SDK into an
// error wrapping a model sentinel or ctx's error. Failures are classified from
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

// Classifier classifies the failed attempts of one provider. The zero value
// of Secret means there is no key to redact.
type Classifier struct {
	// Provider starts every error, e.g. "openai".
	Provider string
	// Secret is the API key, redacted from every message.
	Secret string
	// Timeout bounds one attempt; a timed-out attempt's error names it.
	Timeout time.Duration
	// NotFoundHint, when set, is added to a 404's error: what about the
	// configured base URL likely sent the request to a path the server lacks.
	NotFoundHint string
}

// Attempt makes one call under c.Timeout: send must install x.Middleware on
// its SDK request and use ctx. A failure comes back as an error wrapping
// ctx's error or a model sentinel, keys redacted, with the wait the server
// asked for (Retry-After): the shape model.Retry calls for.
func Attempt[T any](ctx context.Context, c Classifier, send func(ctx context.Context, x *Exchange) (T, error)) (T, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var x Exchange
	out, err := send(actx, &x)
	if err == nil {
		return out, 0, nil
	}
	var zero T
	return zero, x.retryAfter(), c.classify(ctx, actx, err, &x)
}

// classify turns a failed attempt into an error wrapping ctx's error or a
// model sentinel: by HTTP status (model.StatusError) with the server's
// message; ErrServer for a timed-out attempt or a broken connection;
// ErrBadResponse for a 2xx body that does not decode. ctx is the caller's,
// actx the attempt's (with the timeout).
func (c Classifier) classify(ctx, actx context.Context, err error, x *Exchange) error {
	if ctx.Err() != nil {
		return c.ctxError(ctx)
	}
	if x.status >= 400 {
		msg := c.redact(message(x.body))
		if x.status == 404 && c.NotFoundHint != "" {
			msg = strings.TrimSpace(msg + " (" + c.NotFoundHint + ")")
		}
		return model.StatusError(c.Provider, x.status, msg)
	}
	if actx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: no answer within %s: %w", c.Provider, model.ErrServer, c.Timeout, context.DeadlineExceeded)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || x.readErr != nil {
		return fmt.Errorf("%s: %w: %s", c.Provider, model.ErrServer, c.redact(err.Error()))
	}
	if x.status >= 200 && x.status < 300 {
		return fmt.Errorf("%s: %w: %s", c.Provider, model.ErrBadResponse, c.redact(err.Error()))
	}
	return fmt.Errorf("%s: %s", c.Provider, c.redact(err.Error()))
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
func (c Classifier) ctxError(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%s: %w: %w", c.Provider, ctx.Err(), cause)
	}
	return fmt.Errorf("%s: %w", c.Provider, ctx.Err())
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

// redact removes the configured key and anything shaped like a key.
func (c Classifier) redact(s string) string {
	if c.Secret != "" {
		s = strings.ReplaceAll(s, c.Secret, "[redacted]")
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}
