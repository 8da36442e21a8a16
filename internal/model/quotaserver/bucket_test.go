package quotaserver

import (
	"net/http"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	type step struct {
		at        time.Duration // since the bucket was made
		take      int64         // tokens asked; 0 only inspects
		wantOK    bool          // whether the tokens were there (and taken)
		remaining int64         // whole tokens left afterwards
		wait      time.Duration // until one more token
		full      time.Duration // until full
	}
	tests := []struct {
		name                string
		capacity, perMinute int64
		steps               []step
	}{
		{"starts full, drains, refills at rate", 2, 60, []step{
			{at: 0, take: 1, wantOK: true, remaining: 1, wait: 0, full: time.Second},
			{at: 0, take: 1, wantOK: true, remaining: 0, wait: time.Second, full: 2 * time.Second},
			{at: 0, take: 1, wantOK: false, remaining: 0, wait: time.Second, full: 2 * time.Second},
			{at: 500 * time.Millisecond, remaining: 0, wait: 500 * time.Millisecond, full: 1500 * time.Millisecond},
			{at: time.Second, take: 1, wantOK: true, remaining: 0, wait: time.Second, full: 2 * time.Second},
			{at: time.Hour, remaining: 2, wait: 0, full: 0},
		}},
		{"fast rate, exact at the nanosecond", 10, 6000, []step{
			{at: 0, take: 10, wantOK: true, remaining: 0, wait: 10 * time.Millisecond, full: 100 * time.Millisecond},
			{at: 10*time.Millisecond - 1, take: 1, wantOK: false, remaining: 0, wait: 1, full: 90*time.Millisecond + 1},
			{at: 10 * time.Millisecond, take: 1, wantOK: true, remaining: 0, wait: 10 * time.Millisecond, full: 100 * time.Millisecond},
		}},
		{"slow rate: a minute a token", 6, 1, []step{
			{at: 0, take: 6, wantOK: true, remaining: 0, wait: time.Minute, full: 6 * time.Minute},
			{at: 90 * time.Second, remaining: 1, wait: 0, full: 4*time.Minute + 30*time.Second},
		}},
		{"a charge above the capacity needs a full bucket", 100, 6000, []step{
			{at: 0, take: 1000, wantOK: true, remaining: 0, wait: 10 * time.Millisecond, full: time.Second},
			{at: 500 * time.Millisecond, take: 1000, wantOK: false, remaining: 50, wait: 0, full: 500 * time.Millisecond},
			{at: time.Second, take: 1000, wantOK: true, remaining: 0, wait: 10 * time.Millisecond, full: time.Second},
		}},
		{"a clock stepping back adds nothing", 1, 60, []step{
			{at: time.Second, take: 1, wantOK: true, remaining: 0, wait: time.Second, full: time.Second},
			{at: 0, take: 1, wantOK: false, remaining: 0, wait: time.Second, full: time.Second},
			{at: 2 * time.Second, take: 1, wantOK: true, remaining: 0, wait: time.Second, full: time.Second},
		}},
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBucket(tc.capacity, tc.perMinute, t0)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.take > 0 {
					ok := b.allows(now, s.take)
					if ok {
						b.take(now, s.take)
					}
					if ok != s.wantOK {
						t.Fatalf("step %d: allows(%d) = %v, want %v", i, s.take, ok, s.wantOK)
					}
				}
				if got := b.remaining(now); got != s.remaining {
					t.Errorf("step %d: remaining = %d, want %d", i, got, s.remaining)
				}
				if got := b.wait(now, 1); got != s.wait {
					t.Errorf("step %d: wait(1) = %v, want %v", i, got, s.wait)
				}
				if got := b.untilFull(now); got != s.full {
					t.Errorf("step %d: untilFull = %v, want %v", i, got, s.full)
				}
			}
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "1",
		time.Nanosecond:         "1",
		time.Second:             "1",
		time.Second + 1:         "2",
		2500 * time.Millisecond: "3",
		time.Minute:             "60",
	} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestAdmitHeaders checks the rate-limit headers an answer carries, at
// explicit times, for both formats.
func TestAdmitHeaders(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newServer := func(f Format) *Server {
		cfg, err := Config{Format: f, RequestsPerMinute: 60, Burst: 360, TokensPerMinute: 6000}.check()
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{cfg: cfg, proto: protocols[f]}
		s.refill(t0)
		return s
	}

	s := newServer(OpenAI)
	for i := range 359 {
		if v, _ := s.admit(t0, 10); v != accepted {
			t.Fatalf("request %d refused", i)
		}
	}
	v, q := s.admit(t0, 10)
	if v != accepted {
		t.Fatal("request 360 refused")
	}
	h := http.Header{}
	s.proto.limitHeaders(h, q)
	want := map[string]string{
		"x-ratelimit-limit-requests":     "60",
		"x-ratelimit-remaining-requests": "0",
		"x-ratelimit-reset-requests":     "6m0s",
		"x-ratelimit-limit-tokens":       "6000",
		"x-ratelimit-remaining-tokens":   "2400",
		"x-ratelimit-reset-tokens":       "36s",
	}
	checkHeaders(t, h, want)
	v, q = s.admit(t0.Add(100*time.Millisecond), 10)
	if v != refusedRate || q.retryAfter != 900*time.Millisecond {
		t.Errorf("request 361 after 100ms: verdict %v, retry after %v; want refused, 900ms", v, q.retryAfter)
	}
	h = http.Header{}
	s.proto.limitHeaders(h, q)
	checkHeaders(t, h, map[string]string{"x-ratelimit-reset-requests": "5m59.9s", "x-ratelimit-remaining-tokens": "2410"})

	s = newServer(Anthropic)
	_, q = s.admit(t0, 6000)
	h = http.Header{}
	s.proto.limitHeaders(h, q)
	checkHeaders(t, h, map[string]string{
		"anthropic-ratelimit-requests-limit":         "60",
		"anthropic-ratelimit-requests-remaining":     "359",
		"anthropic-ratelimit-requests-reset":         "2026-01-02T03:04:06.000Z",
		"anthropic-ratelimit-tokens-limit":           "6000",
		"anthropic-ratelimit-tokens-remaining":       "0",
		"anthropic-ratelimit-tokens-reset":           "2026-01-02T03:05:05.000Z",
		"anthropic-ratelimit-input-tokens-remaining": "0",
	})
	v, q = s.admit(t0.Add(30*time.Second), 3001)
	if v != refusedRate || !q.refusedTokens || q.retryAfter != 10*time.Millisecond {
		t.Errorf("token refusal: verdict %v, tokens %v, retry after %v; want refused, true, 10ms", v, q.refusedTokens, q.retryAfter)
	}
}

func checkHeaders(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

func TestFanoutIdeal(t *testing.T) {
	cfg := Config{RequestsPerMinute: 600, Burst: 10, Latency: 300 * time.Millisecond}
	if got, want := cfg.FanoutIdeal(200), 20100*time.Millisecond; got != want {
		t.Errorf("FanoutIdeal(200) = %v, want %v", got, want)
	}
	if got, want := cfg.FanoutIdeal(3), 900*time.Millisecond; got != want {
		t.Errorf("FanoutIdeal(3) = %v, want %v (inside the burst)", got, want)
	}
}
