package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		n        int
		min, max time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{4, 500 * time.Millisecond, time.Second},  // capped
		{60, 500 * time.Millisecond, time.Second}, // no overflow
	} {
		for range 50 {
			if d := b.Delay(tc.n); d < tc.min || d > tc.max {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", tc.n, d, tc.min, tc.max)
			}
		}
	}
	if d := (Backoff{}).Delay(3); d != 0 {
		t.Errorf("zero Backoff Delay = %v, want 0", d)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{"none", http.Header{}, 0, false},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		{"fractional", http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, true},
		{"ms wins", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"3"}}, 250 * time.Millisecond, true},
		{"bad ms falls back", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, 2 * time.Second, true},
		{"negative", http.Header{"Retry-After": {"-1"}}, 0, false},
		{"garbage", http.Header{"Retry-After": {"later"}}, 0, false},
		{"past date", http.Header{"Retry-After": {"Mon, 02 Jan 2006 15:04:05 GMT"}}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RetryAfter(tc.header)
			if got != tc.want || ok != tc.ok {
				t.Errorf("RetryAfter = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if d, ok := RetryAfter(http.Header{"Retry-After": {future}}); !ok || d < 59*time.Minute || d > time.Hour {
		t.Errorf("RetryAfter(date in an hour) = %v, %v", d, ok)
	}
}

var tiny = Backoff{MaxRetries: 3, Base: time.Millisecond, Max: 2 * time.Millisecond}

// calls returns a call func answering errs in order, and the count of calls made.
func calls(errs ...error) (func(context.Context) (time.Duration, error), *int) {
	n := 0
	return func(context.Context) (time.Duration, error) {
		n++
		if n > len(errs) {
			return 0, fmt.Errorf("call %d: script exhausted", n)
		}
		return 0, errs[n-1]
	}, &n
}

func TestRetry(t *testing.T) {
	server := StatusError("p", 500, "boom")
	limited := StatusError("p", 429, "")
	bad := StatusError("p", 400, "")
	for _, tc := range []struct {
		name  string
		errs  []error
		want  error
		calls int
	}{
		{"success", []error{nil}, nil, 1},
		{"retried then success", []error{server, limited, nil}, nil, 3},
		{"not retryable", []error{bad}, ErrBadRequest, 1},
		{"exhausted", []error{server, server, server, server}, ErrServer, 4},
		{"rate limits do not count", []error{limited, server, limited, limited, server, limited, server, limited, nil}, nil, 9},
		{"failures between rate limits still count", []error{server, limited, server, limited, server, limited, server}, ErrServer, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call, n := calls(tc.errs...)
			err := Retry(t.Context(), tiny, nil, call)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Retry = %v, want %v", err, tc.want)
			}
			if *n != tc.calls {
				t.Errorf("%d calls, want %d", *n, tc.calls)
			}
		})
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	n := 0
	start := time.Now()
	err := Retry(t.Context(), tiny, nil, func(context.Context) (time.Duration, error) {
		if n++; n == 1 {
			return 50 * time.Millisecond, StatusError("p", 429, "")
		}
		return 0, nil
	})
	if err != nil || n != 2 {
		t.Fatalf("Retry = %v after %d calls", err, n)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("waited %v, the server asked for 50ms", waited)
	}
}

func TestRetryGivesUpOnLongWaits(t *testing.T) {
	limited := StatusError("p", 429, "")
	t.Run("beyond MaxRetryAfter", func(t *testing.T) {
		n := 0
		err := Retry(t.Context(), tiny, nil, func(context.Context) (time.Duration, error) {
			n++
			return MaxRetryAfter + time.Second, limited
		})
		if !errors.Is(err, ErrRateLimited) || n != 1 {
			t.Errorf("Retry = %v after %d calls; want the rate limit at once", err, n)
		}
	})
	t.Run("beyond the deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		n := 0
		start := time.Now()
		err := Retry(ctx, tiny, nil, func(context.Context) (time.Duration, error) {
			n++
			return 10 * time.Second, limited
		})
		if !errors.Is(err, ErrRateLimited) || n != 1 || time.Since(start) > 500*time.Millisecond {
			t.Errorf("Retry = %v after %d calls and %v; want the rate limit at once", err, n, time.Since(start))
		}
	})
}

func TestRetryCancelledWhileWaiting(t *testing.T) {
	stop := errors.New("stop")
	ctx, cancel := context.WithCancelCause(t.Context())
	slow := Backoff{MaxRetries: 3, Base: time.Minute, Max: time.Minute}
	time.AfterFunc(20*time.Millisecond, func() { cancel(stop) })
	start := time.Now()
	err := Retry(ctx, slow, nil, func(context.Context) (time.Duration, error) {
		return 0, StatusError("p", 503, "")
	})
	if !errors.Is(err, stop) || Retryable(err) {
		t.Errorf("Retry = %v; want the cancel cause, not retryable", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned after %v", took)
	}
}

// retries records what a RetryNotice hears.
type retries struct {
	n     []int
	waits []time.Duration
}

func (r *retries) Retrying(_ context.Context, _ error, n int, wait time.Duration) {
	r.n = append(r.n, n)
	r.waits = append(r.waits, wait)
}

// A provider that keeps answering 429 is retried, with backoff, for as long
// as ctx allows, however small MaxRetries is; every retry is noticed.
func TestRetryRateLimitedUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var heard retries
		ctx := WithRetryNotice(t.Context(), &heard)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		b := Backoff{MaxRetries: 1, Base: time.Second, Max: 4 * time.Second}
		n := 0
		start := time.Now()
		err := Retry(ctx, b, nil, func(context.Context) (time.Duration, error) {
			n++
			return 0, StatusError("p", 429, "")
		})
		if !errors.Is(err, ErrRateLimited) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Retry = %v, want the rate limit or the deadline", err)
		}
		// Backoff up to 4s in a minute: at least 15 calls.
		if n < 15 {
			t.Errorf("%d calls in a minute of 429s, want them retried past MaxRetries", n)
		}
		if took := time.Since(start); took > time.Minute {
			t.Errorf("retried for %v, past the deadline", took)
		}
		if len(heard.n) != n-1 || heard.n[len(heard.n)-1] != n-1 {
			t.Errorf("notices %v for %d calls, want one per retry", heard.n, n)
		}
	})
}

// With a gate, a 429 is retried at once: the gate learnt of it and holds
// the next attempt back. Other failures still back off.
func TestRetryGated(t *testing.T) {
	limited := StatusError("p", 429, "")
	gated := Backoff{MaxRetries: 2, Base: time.Minute, Max: time.Minute, Gated: true}
	t.Run("429 without a sleep", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var heard retries
			ctx := WithRetryNotice(t.Context(), &heard)
			n := 0
			start := time.Now()
			err := Retry(ctx, gated, nil, func(context.Context) (time.Duration, error) {
				if n++; n <= 5 {
					return 30 * time.Second, limited
				}
				return 0, nil
			})
			if err != nil || n != 6 {
				t.Fatalf("Retry = %v after %d calls", err, n)
			}
			if took := time.Since(start); took != 0 {
				t.Errorf("Retry slept %v on gated 429s", took)
			}
			for i, w := range heard.waits {
				if w != 0 {
					t.Errorf("retry %d noticed with a wait of %v, want none", heard.n[i], w)
				}
			}
		})
	})
	t.Run("server error still backs off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := 0
			start := time.Now()
			err := Retry(t.Context(), gated, nil, func(context.Context) (time.Duration, error) {
				if n++; n == 1 {
					return 0, StatusError("p", 503, "")
				}
				return 0, nil
			})
			if err != nil || n != 2 {
				t.Fatalf("Retry = %v after %d calls", err, n)
			}
			if took := time.Since(start); took < 30*time.Second {
				t.Errorf("retried a 503 after %v, want the backoff", took)
			}
		})
	})
	t.Run("beyond MaxRetryAfter", func(t *testing.T) {
		n := 0
		err := Retry(t.Context(), gated, nil, func(context.Context) (time.Duration, error) {
			n++
			return MaxRetryAfter + time.Second, limited
		})
		if !errors.Is(err, ErrRateLimited) || n != 1 {
			t.Errorf("Retry = %v after %d calls; want the rate limit at once", err, n)
		}
	})
	t.Run("beyond the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			n := 0
			err := Retry(ctx, gated, nil, func(context.Context) (time.Duration, error) {
				n++
				return 10 * time.Second, limited
			})
			if !errors.Is(err, ErrRateLimited) || n != 1 {
				t.Errorf("Retry = %v after %d calls; want the rate limit at once", err, n)
			}
		})
	})
}
