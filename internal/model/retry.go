package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter is the longest server-requested wait Retry honours. A server
// asking for more is treated as a refusal: the last error is returned so the
// caller can decide, instead of a call that silently sleeps for an hour.
const MaxRetryAfter = 2 * time.Minute

// Backoff is the retry policy HTTP providers share, so every provider reacts
// to rate limits and outages the same way. Fields are used as given; providers
// resolve their own defaults.
type Backoff struct {
	// MaxRetries is how many times a failure other than a rate limit (5xx,
	// transport failure, stalled stream) is tried again. Rate-limited
	// attempts (429) do not count: a provider asking to retry later is not
	// failing, so they are retried for as long as ctx allows.
	MaxRetries int
	// Base is the delay before the first retry; it doubles on each retry.
	Base time.Duration
	// Max caps the computed delay (not a server's Retry-After).
	Max time.Duration
	// Gated says a model.Gate paces the calls: it learns of every 429 from
	// the attempt's Outcome, pauses the whole endpoint for the wait the
	// provider asked for and queues callers fairly. Retry then retries a
	// 429 at once, without sleeping itself, so that the gate alone decides
	// when the attempt goes out (sleeping here too would wait twice and
	// lose the caller's place in the queue).
	Gated bool
}

// Delay is the wait before retry number n (0 for the first retry): Base·2ⁿ
// capped at Max, with "equal jitter" (a random value in [d/2, d]) so that
// many helpers rate-limited together do not come back in lockstep.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Base
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// Retry calls call until it succeeds, fails with an error that is not
// Retryable, or fails other than by a rate limit more than b.MaxRetries
// times; it returns call's last error.
//
// call reports the wait the server asked for (Retry-After), or zero. That wait
// replaces the computed backoff; if it exceeds MaxRetryAfter or would end after
// ctx's deadline, Retry gives up at once with call's error. A rate-limited
// call (ErrRateLimited) is retried without limit otherwise, and at once when
// b.Gated (the gate waits instead). Cancelling ctx during a wait returns
// ctx's cause, mentioning the last failure.
func Retry(ctx context.Context, b Backoff, log *slog.Logger, call func(context.Context) (time.Duration, error)) error {
	failures := 0
	for n := 0; ; n++ {
		retryAfter, err := call(ctx)
		if err == nil || !Retryable(err) || ctx.Err() != nil {
			return err
		}
		limited := errors.Is(err, ErrRateLimited)
		if !limited {
			if failures >= b.MaxRetries {
				return err
			}
			failures++
		}
		wait := b.Delay(n)
		if retryAfter > 0 {
			if retryAfter > MaxRetryAfter {
				return err
			}
			wait = retryAfter
		} else if limited && b.Gated {
			wait = 0
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return err
		}
		if limited && b.Gated {
			// The gate learnt of the 429 from the attempt's outcome and
			// holds the next attempt back as long as the provider asked.
			wait = 0
		}
		if log != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "model call failed; retrying",
				slog.Int("retry", n+1), slog.Int("failures", failures), slog.Int("max_retries", b.MaxRetries),
				slog.Duration("wait", wait), slog.String("error", err.Error()))
		}
		if notice, ok := ctx.Value(retryNoticeKey{}).(RetryNotice); ok {
			notice.Retrying(ctx, err, n+1, wait)
		}
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last attempt: %v)", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// RetryNotice hears of each retry Retry is about to make: the failure, the
// retry's number (1 for the first) and the wait before it.
type RetryNotice interface {
	Retrying(ctx context.Context, err error, retry int, wait time.Duration)
}

type retryNoticeKey struct{}

// WithRetryNotice returns ctx carrying n: Retry tells it of every retry of
// a call made with the returned context (metrics count them per provider).
func WithRetryNotice(ctx context.Context, n RetryNotice) context.Context {
	return context.WithValue(ctx, retryNoticeKey{}, n)
}

// RetryReason names why err is retried: rate_limited, server_error or other.
func RetryReason(err error) string {
	switch {
	case errors.Is(err, ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, ErrServer):
		return "server_error"
	}
	return "other"
}

// RetryAfter reads the wait a server asked for from Retry-After-Ms
// (milliseconds, sent by some OpenAI-compatible servers) or Retry-After
// (seconds or an HTTP date). It reports false when neither holds a usable value.
func RetryAfter(h http.Header) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || s > 1e9 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
