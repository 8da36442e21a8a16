package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

// sdk stands in for a provider SDK: it sends through the middleware, fails
// on an error status and decodes a success body.
func sdk(url string) func(context.Context, *Exchange) (map[string]any, error) {
	return func(ctx context.Context, x *Exchange) (map[string]any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return nil, err
		}
		res, err := x.Middleware(req, http.DefaultClient.Do)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return nil, err
		}
		if res.StatusCode >= 400 {
			return nil, fmt.Errorf("POST %q: %d %s", url, res.StatusCode, b)
		}
		var out map[string]any
		return out, json.Unmarshal(b, &out)
	}
}

func TestAttempt(t *testing.T) {
	c := Classifier{Provider: "acme", Secret: "my-token", Timeout: 5 * time.Second}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		out  map[string]any
		wait time.Duration
		want error
		msg  string
	}{
		{
			name: "success",
			h: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `{"text":"ok"}`)
			},
			out: map[string]any{"text": "ok"},
		},
		{
			name: "rate limited, with the server's wait and message",
			h: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(429)
				_, _ = io.WriteString(w, `{"error":{"message":"slow down, my-token"}}`)
			},
			wait: 2 * time.Second, want: model.ErrRateLimited,
			msg: "acme: HTTP 429: " + model.ErrRateLimited.Error() + ": slow down, [redacted]",
		},
		{
			name: "success body that does not decode",
			h: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `<html>`)
			},
			want: model.ErrBadResponse,
			msg:  "acme: " + model.ErrBadResponse.Error() + ": invalid character '<' looking for beginning of value",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			out, wait, err := Attempt(t.Context(), c, sdk(srv.URL))
			if diff := cmp.Diff(tc.out, out); diff != "" {
				t.Errorf("out (-want +got):\n%s", diff)
			}
			if wait != tc.wait {
				t.Errorf("wait = %v, want %v", wait, tc.wait)
			}
			if tc.want == nil {
				if err != nil {
					t.Errorf("Attempt = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v does not wrap %v", err, tc.want)
			}
			if diff := cmp.Diff(tc.msg, fmt.Sprint(err)); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAttemptTimeout(t *testing.T) {
	c := Classifier{Provider: "acme", Timeout: 20 * time.Millisecond}
	send := func(ctx context.Context, _ *Exchange) (int, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("send's ctx has no deadline")
		}
		<-ctx.Done()
		return 1, ctx.Err()
	}
	out, _, err := Attempt(t.Context(), c, send)
	if out != 0 {
		t.Errorf("out = %d, want the zero value on failure", out)
	}
	if !errors.Is(err, model.ErrServer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want ErrServer and DeadlineExceeded", err)
	}

	// The caller's own cancellation is not a server failure.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := Attempt(ctx, c, send); !errors.Is(err, context.Canceled) || model.Retryable(err) {
		t.Errorf("error = %v, want a non-retryable context.Canceled", err)
	}
}
