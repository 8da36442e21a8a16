package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// ErrConfig reports a Config (or environment) that New or FromEnv rejects.
var ErrConfig = errors.New("invalid anthropic config")

// maxErrorBody bounds how much of an error response is kept for its message.
const maxErrorBody = 64 << 10

// exchange records what the server answered to one attempt: its status,
// Retry-After and error body. Failures are classified from these rather than
// from the SDK's error types, so both providers share one logic, keep the
// server's own message (the SDK errors drop it or add the URL and raw body)
// and read Retry-After, whose SDK parsing is internal.
type exchange struct {
	status  int
	header  http.Header
	body    []byte // of an error response
	readErr error  // reading a success body failed: the connection broke
}

// middleware is an SDK middleware; the SDK calls it synchronously per attempt.
func (x *exchange) middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if res == nil {
		return res, err
	}
	x.status, x.header = res.StatusCode, res.Header
	switch {
	case res.Body == nil:
	case res.StatusCode >= 400:
		x.body, _ = io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		_ = res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(x.body))
	default:
		res.Body = &watchedBody{ReadCloser: res.Body, x: x}
	}
	return res, err
}

// watchedBody tells a connection that breaks mid-body (retryable) from a
// complete body that does not decode (not retryable).
type watchedBody struct {
	io.ReadCloser
	x *exchange
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.x.readErr = err
	}
	return n, err
}

func (x *exchange) retryAfter() time.Duration {
	if x.header == nil {
		return 0
	}
	d, _ := model.RetryAfter(x.header)
	return d
}

// classify turns a failed attempt into an error wrapping a model sentinel or
// ctx's error. ctx is the caller's, actx the attempt's (with the timeout).
func (m *Model) classify(ctx, actx context.Context, err error, x *exchange) error {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	if x.status >= 400 {
		return model.StatusError(provider, x.status, m.scrub(errorMessage(x.body)))
	}
	if actx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: no answer within %s: %w", provider, model.ErrServer, m.timeout, context.DeadlineExceeded)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || x.readErr != nil {
		return fmt.Errorf("%s: %w: %s", provider, model.ErrServer, m.scrub(err.Error()))
	}
	if x.status >= 200 && x.status < 300 {
		return fmt.Errorf("%s: %w: %s", provider, model.ErrBadResponse, m.scrub(err.Error()))
	}
	return fmt.Errorf("%s: %s", provider, m.scrub(err.Error()))
}

// ctxError wraps ctx's error and, when it differs, its cause, so both
// errors.Is(err, context.Canceled) and errors.Is(err, cause) hold.
func ctxError(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%s: %w: %w", provider, ctx.Err(), cause)
	}
	return fmt.Errorf("%s: %w", provider, ctx.Err())
}

// errorMessage extracts the human part of an error body: Anthropic's
// {"type":"error","error":{"type":...,"message":...}}, a gateway's
// {"error":"..."} or {"message":...}; otherwise the start of the body itself.
func errorMessage(body []byte) string {
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

// scrub removes the configured key and anything shaped like a key.
func (m *Model) scrub(s string) string {
	if m.secret != "" {
		s = strings.ReplaceAll(s, m.secret, "[redacted]")
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}
