package httperr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

func TestClassify(t *testing.T) {
	c := Endpoint{Provider: "acme", Secret: "my-token", IdleTimeout: 1500 * time.Millisecond}
	stop := errors.New("user pressed stop")
	cancelled, cancel := context.WithCancelCause(t.Context())
	cancel(stop)
	plain, cancelPlain := context.WithCancel(t.Context())
	cancelPlain()
	live := t.Context()
	stalled, stall := context.WithCancelCause(live)
	stall(errStalled)
	dnsErr := &net.DNSError{Err: "no such host", Name: "api.example"}
	for _, tc := range []struct {
		name      string
		ctx, actx context.Context
		err       error
		x         Exchange
		want      []error
		msg       string
	}{
		{
			name: "caller cancelled with a cause", ctx: cancelled, actx: cancelled,
			err: context.Canceled, x: Exchange{status: 500},
			want: []error{context.Canceled, stop}, msg: "acme: context canceled: user pressed stop",
		},
		{
			name: "caller cancelled", ctx: plain, actx: plain, err: context.Canceled,
			want: []error{context.Canceled}, msg: "acme: context canceled",
		},
		{
			name: "status with the server's message, keys redacted", ctx: live, actx: live,
			err:  errors.New("401 Unauthorized"),
			x:    Exchange{status: 401, body: []byte(`{"error":{"message":"bad key my-token (sk-abc123456)"}}`)},
			want: []error{model.ErrUnauthorized}, msg: "acme: HTTP 401: " + model.ErrUnauthorized.Error() + ": bad key [redacted] ([redacted])",
		},
		{
			name: "server error without a body", ctx: live, actx: live, err: errors.New("503"),
			x:    Exchange{status: 503},
			want: []error{model.ErrServer}, msg: "acme: HTTP 503: " + model.ErrServer.Error(),
		},
		{
			name: "stalled before the headers", ctx: live, actx: stalled, err: errors.New("request failed: context canceled"),
			want: []error{model.ErrServer},
			msg:  "acme: " + model.ErrServer.Error() + ": stalled: no response for 1.5s",
		},
		{
			name: "stalled mid-stream", ctx: live, actx: stalled, err: context.Canceled,
			x:    Exchange{status: 200, readErr: context.Canceled},
			want: []error{model.ErrServer},
			msg:  "acme: " + model.ErrServer.Error() + ": stream stalled: no bytes for 1.5s",
		},
		{
			name: "stalled reading an error body", ctx: live, actx: stalled, err: errors.New("503"),
			x:    Exchange{status: 503, body: []byte(`{"error":{"message":"overloaded"}}`)},
			want: []error{model.ErrServer}, msg: "acme: HTTP 503: " + model.ErrServer.Error() + ": overloaded",
		},
		{
			name: "stream cut between events", ctx: live, actx: live, err: ErrStreamCut,
			x:    Exchange{status: 200},
			want: []error{model.ErrServer, ErrStreamCut}, msg: "acme: " + model.ErrServer.Error() + ": " + ErrStreamCut.Error(),
		},
		{
			name: "overloaded error event", ctx: live, actx: live,
			err:  fmt.Errorf("wrapped: %w", &EventError{Data: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}),
			x:    Exchange{status: 200},
			want: []error{model.ErrServer}, msg: "acme: " + model.ErrServer.Error() + ": error event in the stream: Overloaded",
		},
		{
			name: "rate limit error event, key redacted", ctx: live, actx: live,
			err:  &EventError{Data: []byte(`{"error":{"message":"slow down my-token","type":"requests","code":"rate_limit_exceeded"}}`)},
			x:    Exchange{status: 200},
			want: []error{model.ErrRateLimited}, msg: "acme: " + model.ErrRateLimited.Error() + ": error event in the stream: slow down [redacted]",
		},
		{
			name: "invalid request error event", ctx: live, actx: live,
			err:  &EventError{Data: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`)},
			x:    Exchange{status: 200},
			want: []error{model.ErrBadRequest}, msg: "acme: " + model.ErrBadRequest.Error() + ": error event in the stream: bad",
		},
		{
			name: "error event that is not JSON", ctx: live, actx: live,
			err:  &EventError{Data: []byte(`upstream died`)},
			x:    Exchange{status: 200},
			want: []error{model.ErrServer}, msg: "acme: " + model.ErrServer.Error() + ": error event in the stream: upstream died",
		},
		{
			name: "transport failure", ctx: live, actx: live, err: dnsErr,
			want: []error{model.ErrServer}, msg: "acme: " + model.ErrServer.Error() + ": " + dnsErr.Error(),
		},
		{
			name: "connection broke mid-body", ctx: live, actx: live, err: errors.New("unexpected EOF my-token"),
			x:    Exchange{status: 200, readErr: io.ErrUnexpectedEOF},
			want: []error{model.ErrServer}, msg: "acme: " + model.ErrServer.Error() + ": unexpected EOF [redacted]",
		},
		{
			name: "success body that does not decode", ctx: live, actx: live, err: errors.New("invalid character '<'"),
			x:    Exchange{status: 200},
			want: []error{model.ErrBadResponse}, msg: "acme: " + model.ErrBadResponse.Error() + ": invalid character '<'",
		},
		{
			name: "anything else", ctx: live, actx: live, err: errors.New("sdk refused sk-abc123456"),
			msg: "acme: sdk refused [redacted]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.classify(tc.ctx, tc.actx, tc.err, &tc.x)
			if err == nil {
				t.Fatal("Classify = nil")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not wrap %q", err, w)
				}
			}
			if len(tc.want) == 0 && model.Retryable(err) {
				t.Errorf("error %q is retryable", err)
			}
			if diff := cmp.Diff(tc.msg, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"OpenAI", `{"error":{"message":"Rate limit reached","type":"requests"}}`, "Rate limit reached"},
		{"Anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`, "Overloaded"},
		{"Ollama", `{"error":"model \"x\" not found, try pulling it first"}`, `model "x" not found, try pulling it first`},
		{"gateway", `{"error":"bad gateway"}`, "bad gateway"},
		{"top-level message", `{"message":"upstream timeout"}`, "upstream timeout"},
		{"empty nested message falls through", `{"error":{"message":""},"message":"outer"}`, "outer"},
		{"JSON without a message", `{"detail":"x"}`, `{"detail":"x"}`},
		{"text", "upstream connect error", "upstream connect error"},
		{"HTML, white space collapsed", "<html>\n  Bad   Gateway\n</html>", "<html> Bad Gateway </html>"},
		{"long, clipped", strings.Repeat("x", 400), strings.Repeat("x", 300) + "…"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, message([]byte(tc.body))); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		name, secret, in, want string
	}{
		{"configured key", "my-local-token", "bad key my-local-token", "bad key [redacted]"},
		{"key-shaped tokens", "", "sk-proj-abc***xyz and rk-live-123456789 or pk-abcdef", "[redacted] and [redacted] or [redacted]"},
		{"Anthropic key", "gateway-token-123", "key gateway-token-123 or sk-ant-api03-abcdefgh rejected", "key [redacted] or [redacted] rejected"},
		{"too short to be a key", "", "sk-abc and task-abcdefgh", "sk-abc and task-abcdefgh"},
		{"a one-letter key, inside words", "e", "unexpected end of JSON input", "unexpected end of JSON input"},
		{"a one-letter key on its own", "x", "bad key x, try again", "bad key [redacted], try again"},
		{"a short key ending a sentence", "k1", "bad key k1.", "bad key [redacted]."},
		{"a short key at the ends", "abc", "abc rejected: abc", "[redacted] rejected: [redacted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Endpoint{Secret: tc.secret}.redact(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("redact (-want +got):\n%s", diff)
			}
		})
	}
}
