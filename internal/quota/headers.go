package quota

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// limitSignal is what an answer said of one of the provider's limits.
type limitSignal struct {
	limit, remaining       int64
	hasLimit, hasRemaining bool
}

func (s limitSignal) any() bool { return s.hasLimit || s.hasRemaining }

// signals is what one answer's headers say of the quota.
type signals struct {
	requests, tokens, input, output limitSignal
	// retryAfter is the wait the provider asked for, from the answer's
	// arrival; zero when it asked none.
	retryAfter time.Duration
}

// any reports whether the answer carried a rate-limit header at all.
func (s signals) any() bool {
	return s.requests.any() || s.tokens.any() || s.input.any() || s.output.any()
}

// IsSignal reports whether the header called name (any case) is one that
// parseSignals reads, so a caller passing headers along can keep only those.
func IsSignal(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "x-ratelimit-") || strings.HasPrefix(n, "anthropic-ratelimit-") ||
		n == "retry-after" || n == "retry-after-ms" || n == "date"
}

// parseSignals reads OpenAI's x-ratelimit-{limit,remaining}-{requests,tokens},
// Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining}, and retry-after-ms or retry-after
// (seconds or an HTTP date, taken against the answer's Date header when it
// has one so that the two clocks need not agree, else against at).
//
// The reset headers are not read: remaining is the same level measured
// directly, while reset durations are rounded by some providers (Anthropic
// sends whole seconds), which would overstate the room.
func parseSignals(h http.Header, at time.Time) signals {
	var s signals
	read := func(limitKey, remainingKey string) limitSignal {
		var ls limitSignal
		ls.limit, ls.hasLimit = headerInt(h, limitKey)
		ls.remaining, ls.hasRemaining = headerInt(h, remainingKey)
		if ls.hasLimit && ls.limit <= 0 {
			ls.hasLimit = false
		}
		return ls
	}
	first := func(a, b limitSignal) limitSignal {
		if a.any() {
			return a
		}
		return b
	}
	s.requests = first(read("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests"),
		read("anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining"))
	s.tokens = first(read("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens"),
		read("anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining"))
	s.input = read("anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-remaining")
	s.output = read("anthropic-ratelimit-output-tokens-limit", "anthropic-ratelimit-output-tokens-remaining")
	s.retryAfter = retryAfter(h, at)
	return s
}

// headerInt reads a non-negative whole number (a fraction is cut).
func headerInt(h http.Header, key string) (int64, bool) {
	v := strings.TrimSpace(h.Get(key))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return max(n, 0), true
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f < 1<<62 {
		return int64(f), true
	}
	return 0, false
}

// retryAfter reads retry-after-ms, else retry-after.
func retryAfter(h http.Header, at time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	ref := at
	if d, err := http.ParseTime(h.Get("date")); err == nil {
		ref = d
	}
	return max(when.Sub(ref), 0)
}
