package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
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
	c := Endpoint{Provider: "acme", Secret: "my-token", IdleTimeout: 5 * time.Second}
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
			out, wait, err := Attempt(t.Context(), c, model.Ask{}, sdk(srv.URL))
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

// feed is a response body fed by a channel, as a server sends bytes; a
// read waits for the next piece, the end (close) or ctx, as a real
// connection's does.
type feed struct {
	ctx    context.Context
	pieces chan string
}

func (f *feed) Read(p []byte) (int, error) {
	select {
	case s, ok := <-f.pieces:
		if !ok {
			return 0, io.EOF
		}
		return copy(p, s), nil
	case <-f.ctx.Done():
		return 0, context.Cause(f.ctx)
	}
}

func (f *feed) Close() error { return nil }

// streamed sends through x to a fake transport whose headers come after
// headerDelay and whose body is pieces, and reads the whole body.
func streamed(headerDelay time.Duration, pieces chan string) func(context.Context, *Exchange) (string, error) {
	return func(ctx context.Context, x *Exchange) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://acme.test/v1", nil)
		if err != nil {
			return "", err
		}
		res, err := x.Middleware(req, func(r *http.Request) (*http.Response, error) {
			select {
			case <-time.After(headerDelay):
			case <-r.Context().Done():
				return nil, fmt.Errorf("POST: %w", r.Context().Err())
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: &feed{ctx: r.Context(), pieces: pieces}}, nil
		})
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
}

// An answer whose bytes keep coming is never cut, however long it takes;
// silence, before the headers or between bytes, fails the attempt as a
// server error that says it stalled.
func TestAttemptIdleTimeout(t *testing.T) {
	e := Endpoint{Provider: "acme", IdleTimeout: time.Second}
	t.Run("a long answer that keeps coming", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pieces := make(chan string)
			go func() {
				for range 60 {
					time.Sleep(900 * time.Millisecond)
					pieces <- "x"
				}
				close(pieces)
			}()
			start := time.Now()
			out, _, err := Attempt(t.Context(), e, model.Ask{}, streamed(900*time.Millisecond, pieces))
			if err != nil || out != strings.Repeat("x", 60) {
				t.Fatalf("Attempt = %q, %v", out, err)
			}
			if took := time.Since(start); took < 54*time.Second {
				t.Errorf("took %v", took)
			}
		})
	})
	t.Run("stalled mid-stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pieces := make(chan string)
			go func() {
				pieces <- "x"
				time.Sleep(500 * time.Millisecond)
				pieces <- "y"
			}()
			start := time.Now()
			_, _, err := Attempt(t.Context(), e, model.Ask{}, streamed(0, pieces))
			if !errors.Is(err, model.ErrServer) || err.Error() != "acme: "+model.ErrServer.Error()+": stream stalled: no bytes for 1s" {
				t.Errorf("Attempt = %v, want a stalled stream", err)
			}
			if took := time.Since(start); took != 1500*time.Millisecond {
				t.Errorf("failed after %v, want 1s after the last byte (1.5s)", took)
			}
		})
	})
	t.Run("no headers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, err := Attempt(t.Context(), e, model.Ask{}, streamed(time.Hour, nil))
			if !errors.Is(err, model.ErrServer) || err.Error() != "acme: "+model.ErrServer.Error()+": stalled: no response for 1s" {
				t.Errorf("Attempt = %v, want a stall before the headers", err)
			}
		})
	})
	t.Run("no idle timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pieces := make(chan string, 1)
			pieces <- "late"
			close(pieces)
			out, _, err := Attempt(t.Context(), Endpoint{Provider: "acme"}, model.Ask{}, streamed(time.Hour, pieces))
			if err != nil || out != "late" {
				t.Errorf("Attempt = %q, %v", out, err)
			}
		})
	})
}

func TestAttemptCancelled(t *testing.T) {
	e := Endpoint{Provider: "acme", IdleTimeout: time.Minute}
	send := func(ctx context.Context, _ *Exchange) (int, error) {
		<-ctx.Done()
		return 1, ctx.Err()
	}
	// The caller's own cancellation is not a server failure.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	out, _, err := Attempt(ctx, e, model.Ask{}, send)
	if !errors.Is(err, context.Canceled) || model.Retryable(err) {
		t.Errorf("error = %v, want a non-retryable context.Canceled", err)
	}
	if out != 0 {
		t.Errorf("out = %d, want the zero value on failure", out)
	}
}

// gate records the tickets of an Attempt.
type gate struct {
	err      error // Take's answer
	asks     []model.Ask
	outcomes []model.Outcome
}

func (g *gate) Take(ctx context.Context, ask model.Ask) (model.Ticket, error) {
	if g.err != nil {
		return nil, g.err
	}
	g.asks = append(g.asks, ask)
	return ticket{g}, nil
}

type ticket struct{ g *gate }

func (t ticket) Done(o model.Outcome) { t.g.outcomes = append(t.g.outcomes, o) }

// Every attempt takes one ticket and gives it back once, with what the
// server answered: status, headers and, for a success, the usage.
func TestAttemptGate(t *testing.T) {
	usage := model.Usage{InputTokens: 5, OutputTokens: 2}
	ask := model.Ask{Run: "r", Thread: "t", InputTokens: 9, OutputTokens: 99}
	for _, tc := range []struct {
		name   string
		h      http.HandlerFunc
		status int
		usage  model.Usage
	}{
		{"success", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Ratelimit-Remaining-Requests", "41")
			_, _ = io.WriteString(w, `{"ok":true}`)
		}, 200, usage},
		{"rate limited", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(429)
		}, 429, model.Usage{}},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
		}, 500, model.Usage{}},
		{"success body that does not decode", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"trunc`)
		}, 200, model.Usage{}},
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
		}, 0, model.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			g := &gate{}
			e := Endpoint{Provider: "acme", IdleTimeout: 5 * time.Second, Gate: g}
			before := time.Now()
			_, _, _ = Attempt(t.Context(), e, ask, func(ctx context.Context, x *Exchange) (map[string]any, error) {
				if len(g.asks) != 1 || len(g.outcomes) != 0 {
					t.Errorf("send ran with %d tickets taken and %d given back, want 1 and 0", len(g.asks), len(g.outcomes))
				}
				out, err := sdk(srv.URL)(ctx, x)
				x.SetUsage(usage)
				return out, err
			})
			if len(g.asks) != 1 || g.asks[0] != ask {
				t.Errorf("asks %+v, want one %+v", g.asks, ask)
			}
			if len(g.outcomes) != 1 {
				t.Fatalf("Done called %d times, want once", len(g.outcomes))
			}
			o := g.outcomes[0]
			if o.Status != tc.status || o.Usage != tc.usage {
				t.Errorf("outcome status %d usage %+v, want %d %+v", o.Status, o.Usage, tc.status, tc.usage)
			}
			if tc.status == 0 {
				if o.Header != nil || !o.At.IsZero() {
					t.Errorf("outcome without an answer has header %v, at %v", o.Header, o.At)
				}
				return
			}
			if o.At.Before(before) || o.At.After(time.Now()) {
				t.Errorf("outcome At %v is not when the headers came", o.At)
			}
			if tc.status == 429 && (o.Header.Get("Retry-After") != "3" || !o.Refused()) {
				t.Errorf("the 429's outcome lost its headers: %v", o.Header)
			}
			if tc.name == "success" && o.Header.Get("X-Ratelimit-Remaining-Requests") != "41" {
				t.Errorf("the success's outcome lost its headers: %v", o.Header)
			}
		})
	}
}

func TestAttemptGateRefuses(t *testing.T) {
	sent := false
	send := func(context.Context, *Exchange) (int, error) { sent = true; return 1, nil }

	broken := errors.New("coordinator unreachable")
	_, _, err := Attempt(t.Context(), Endpoint{Provider: "acme", Gate: &gate{err: broken}}, model.Ask{}, send)
	if !errors.Is(err, broken) || model.Retryable(err) || err.Error() != "acme: quota gate: coordinator unreachable" {
		t.Errorf("Attempt = %v, want the gate's error", err)
	}

	stop := errors.New("user pressed stop")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(stop)
	_, _, err = Attempt(ctx, Endpoint{Provider: "acme", Gate: &gate{err: context.Canceled}}, model.Ask{}, send)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, stop) {
		t.Errorf("Attempt = %v, want ctx's error with its cause", err)
	}
	if sent {
		t.Error("the attempt was sent without a ticket")
	}
}

func TestAskFor(t *testing.T) {
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hello"}}, Args: model.Args{"max_tokens": 300}}
	ctx := model.WithCaller(t.Context(), model.Caller{Run: "run-1", Thread: "th-2"})
	in, _ := model.EstimateTokens(req)
	if got, want := AskFor(ctx, req), (model.Ask{Run: "run-1", Thread: "th-2", InputTokens: in, OutputTokens: 300}); got != want {
		t.Errorf("AskFor = %+v, want %+v", got, want)
	}
	if got := AskFor(t.Context(), req); got.Run != "" || got.Thread != "" {
		t.Errorf("AskFor without a caller = %+v", got)
	}
}
