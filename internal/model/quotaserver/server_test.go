package quotaserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// start starts a server closed at the end of the test.
func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// body is a small request in format f for the task, streaming or not.
func body(f Format, task string, stream bool) string {
	if f == Anthropic {
		return `{"model":"m","max_tokens":100,"stream":` + strconv.FormatBool(stream) +
			`,"messages":[{"role":"user","content":` + strconv.Quote(task) + `}]}`
	}
	return `{"model":"m","stream":` + strconv.FormatBool(stream) +
		`,"messages":[{"role":"user","content":` + strconv.Quote(task) + `}]}`
}

func path(f Format) string { return protocols[f].path }

// post sends a request and reads the whole answer.
func post(t *testing.T, s *Server, p, b string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(s.URL()+p, "application/json", strings.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, got
}

// errorShape decodes a provider error body, failing the test unless it has
// the provider's shape.
func errorShape(t *testing.T, f Format, b []byte) (typ, msg string) {
	t.Helper()
	if f == Anthropic {
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Message == "" {
			t.Fatalf("not an Anthropic error body (%v): %s", err, b)
		}
		return e.Error.Type, e.Error.Message
	}
	var e struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Code == nil || e.Error.Param == nil {
		t.Fatalf("not an OpenAI error body (%v): %s", err, b)
	}
	return e.Error.Type, e.Error.Message
}

var formats = []Format{OpenAI, Anthropic}

// TestRefusalSignals checks, for each format and Signals mode, the headers
// of an accepted answer and of a 429, and the 429's body.
func TestRefusalSignals(t *testing.T) {
	for _, f := range formats {
		for _, sig := range []Signals{SignalHeaders, SignalRetryAfter, SignalBare} {
			t.Run(string(f)+"/"+string(sig), func(t *testing.T) {
				t.Parallel()
				// One request, then one a second: the second is refused for ~1s.
				s := start(t, Config{Format: f, Signals: sig, RequestsPerMinute: 60, Burst: 1, TokensPerMinute: 100000})
				before := time.Now()
				ok, _ := post(t, s, path(f), body(f, "leaf 1", false))
				refused, b := post(t, s, path(f), body(f, "leaf 2", false))
				if ok.StatusCode != 200 || refused.StatusCode != 429 {
					t.Fatalf("statuses %d, %d; want 200, 429", ok.StatusCode, refused.StatusCode)
				}
				if typ, _ := errorShape(t, f, b); typ != "rate_limit_error" {
					t.Errorf("429 error type %q, want rate_limit_error", typ)
				}
				if ct := refused.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("429 Content-Type %q", ct)
				}
				wantRetry := map[Signals]string{SignalHeaders: "1", SignalRetryAfter: "1", SignalBare: ""}[sig]
				if got := refused.Header.Get("Retry-After"); got != wantRetry {
					t.Errorf("429 Retry-After %q, want %q", got, wantRetry)
				}
				if got := ok.Header.Get("Retry-After"); got != "" {
					t.Errorf("200 has Retry-After %q", got)
				}
				for _, resp := range []*http.Response{ok, refused} {
					limits := limitHeaderNames(resp.Header)
					if sig != SignalHeaders {
						if len(limits) > 0 {
							t.Errorf("%d carries rate-limit headers %v", resp.StatusCode, limits)
						}
						continue
					}
					checkLimitHeaders(t, f, resp, before)
				}
			})
		}
	}
}

func limitHeaderNames(h http.Header) []string {
	var out []string
	for k := range h {
		k = strings.ToLower(k)
		if strings.HasPrefix(k, "x-ratelimit-") || strings.HasPrefix(k, "anthropic-ratelimit-") {
			out = append(out, k)
		}
	}
	return out
}

// checkLimitHeaders checks that every rate-limit header is there and parses
// as the provider's clients read it, for RPM 60 with one request made.
func checkLimitHeaders(t *testing.T, f Format, resp *http.Response, before time.Time) {
	t.Helper()
	h := resp.Header
	wantNum := func(k string, want int) {
		if n, err := strconv.Atoi(h.Get(k)); err != nil || n != want {
			t.Errorf("%d: %s = %q, want %d", resp.StatusCode, k, h.Get(k), want)
		}
	}
	if f == OpenAI {
		wantNum("x-ratelimit-limit-requests", 60)
		wantNum("x-ratelimit-remaining-requests", 0)
		wantNum("x-ratelimit-limit-tokens", 100000)
		for _, k := range []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} {
			d, err := time.ParseDuration(h.Get(k))
			if err != nil || d <= 0 || d > time.Second {
				t.Errorf("%d: %s = %q, want a duration in (0, 1s]", resp.StatusCode, k, h.Get(k))
			}
		}
		if _, err := strconv.Atoi(h.Get("x-ratelimit-remaining-tokens")); err != nil {
			t.Errorf("x-ratelimit-remaining-tokens = %q", h.Get("x-ratelimit-remaining-tokens"))
		}
		return
	}
	wantNum("anthropic-ratelimit-requests-limit", 60)
	wantNum("anthropic-ratelimit-requests-remaining", 0)
	wantNum("anthropic-ratelimit-tokens-limit", 100000)
	wantNum("anthropic-ratelimit-input-tokens-limit", 100000)
	for _, k := range []string{"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-input-tokens-reset"} {
		at, err := time.Parse(time.RFC3339, h.Get(k))
		if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second+time.Millisecond)) {
			t.Errorf("%d: %s = %q, want an RFC 3339 time within a second", resp.StatusCode, k, h.Get(k))
		}
	}
}

// TestTokenLimit checks that the token bucket refuses a request its
// requests bucket would allow, and says so.
func TestTokenLimit(t *testing.T) {
	for _, f := range formats {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			b := body(f, "leaf "+strings.Repeat("x", 400), false) // > 100 tokens
			s := start(t, Config{Format: f, RequestsPerMinute: 1000, TokensPerMinute: 150})
			if resp, _ := post(t, s, path(f), b); resp.StatusCode != 200 {
				t.Fatalf("first request: %d", resp.StatusCode)
			}
			resp, got := post(t, s, path(f), b)
			if resp.StatusCode != 429 {
				t.Fatalf("second request: %d, want 429", resp.StatusCode)
			}
			if _, msg := errorShape(t, f, got); !strings.Contains(msg, "tokens per min") {
				t.Errorf("message %q does not name the token limit", msg)
			}
			if st := s.Stats(); st.RefusedRate != 1 || st.Accepted != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestMaxInFlight checks that one request beyond MaxInFlight is refused
// while another is answered, and accepted again after.
func TestMaxInFlight(t *testing.T) {
	for _, f := range formats {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			s := start(t, Config{Format: f, MaxInFlight: 1, StallAfter: 1})
			// A stalled stream holds the one slot until its client goes.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+path(f), strings.NewReader(body(f, "leaf 1", true)))
			first, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Body.Close()
			resp, got := post(t, s, path(f), body(f, "leaf 2", false))
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("second request: %d, Retry-After %q; want 429, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if _, msg := errorShape(t, f, got); !strings.Contains(msg, "in flight") {
				t.Errorf("message %q does not name the in-flight limit", msg)
			}
			cancel()
			waitFor(t, func() bool { return s.Stats().InFlight == 0 })
			st := s.Stats()
			if st.RefusedInFlight != 1 || st.Refused != 1 || st.MaxInFlight != 1 || st.Accepted != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// waitFor polls cond for up to 10s: long enough for a loaded machine.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
	}
}

// TestBadRequests checks the 400s and 404s in the provider's error shape.
func TestBadRequests(t *testing.T) {
	for _, f := range formats {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			s := start(t, Config{Format: f, StreamOnly: true})
			cases := []struct {
				path, body string
				status     int
			}{
				{path(f), `{"model":`, 400},
				{path(f), `{"messages":[]}`, 400},
				{path(f), body(f, "leaf 1", false), 400}, // StreamOnly
				{"/v1/nothing", body(f, "leaf 1", true), 404},
			}
			for _, c := range cases {
				resp, got := post(t, s, c.path, c.body)
				if resp.StatusCode != c.status {
					t.Errorf("%s %s: %d, want %d", c.path, c.body, resp.StatusCode, c.status)
					continue
				}
				errorShape(t, f, got)
			}
			if resp, _ := post(t, s, path(f), body(f, "leaf 1", true)); resp.StatusCode != 200 {
				t.Errorf("streaming request: %d", resp.StatusCode)
			}
			st := s.Stats()
			if st.BadRequests != 4 || st.Accepted != 1 || st.Requests != 5 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestStatsAndReset checks the counts and that Reset refills the buckets.
func TestStatsAndReset(t *testing.T) {
	s := start(t, Config{RequestsPerMinute: 1})
	before := time.Now()
	post(t, s, path(OpenAI), body(OpenAI, "leaf 1", false))
	post(t, s, path(OpenAI), body(OpenAI, "leaf 2", false))
	st := s.Stats()
	if st.Requests != 2 || st.Accepted != 1 || st.Refused != 1 || st.RefusedRate != 1 || st.MaxInFlight != 1 ||
		st.First.Before(before) || st.Last.Before(st.First) {
		t.Errorf("stats %+v", st)
	}
	s.Reset()
	if st := s.Stats(); st != (Stats{}) {
		t.Errorf("stats after Reset %+v", st)
	}
	if resp, _ := post(t, s, path(OpenAI), body(OpenAI, "leaf 3", false)); resp.StatusCode != 200 {
		t.Errorf("after Reset: %d, want 200", resp.StatusCode)
	}
}

// TestLatency checks that answers take at least Latency, streamed or not,
// and that concurrent answers overlap.
func TestLatency(t *testing.T) {
	const latency = 200 * time.Millisecond
	s := start(t, Config{Latency: latency})
	began := time.Now()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			resp, got := post(t, s, path(OpenAI), body(OpenAI, "leaf", i%2 == 0))
			if resp.StatusCode != 200 || !bytes.Contains(got, []byte("leaf")) {
				t.Errorf("%d %s", resp.StatusCode, got)
			}
		})
	}
	wg.Wait()
	if d := time.Since(began); d < latency {
		t.Errorf("answers took %v, want at least %v", d, latency)
	}
	if st := s.Stats(); st.MaxInFlight < 2 {
		// Four requests each held 200ms; at least two should have met.
		t.Logf("max in flight %d (a very loaded machine?)", st.MaxInFlight)
	}
}

// TestStallAfter checks that a stalled answer sends its first events, then
// nothing until the client gives up, and that the server then lets it go.
func TestStallAfter(t *testing.T) {
	for _, f := range formats {
		for _, stream := range []bool{true, false} {
			t.Run(string(f)+"/stream="+strconv.FormatBool(stream), func(t *testing.T) {
				t.Parallel()
				s := start(t, Config{Format: f, StallAfter: 2})
				client := &http.Client{Timeout: time.Second}
				resp, err := client.Post(s.URL()+path(f), "application/json", strings.NewReader(body(f, "leaf 1", stream)))
				if err != nil {
					t.Fatal(err) // the status and headers come before the stall
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				var timeout interface{ Timeout() bool }
				if !errors.As(err, &timeout) || !timeout.Timeout() {
					t.Fatalf("reading the stalled answer: %v, want a timeout", err)
				}
				events := bytes.Count(got, []byte("data: "))
				if want := map[bool]int{true: 2, false: 0}[stream]; events != want || (!stream && len(got) != 0) {
					t.Errorf("got %d events before the stall, want %d:\n%s", events, want, got)
				}
				waitFor(t, func() bool { return s.Stats().InFlight == 0 })
			})
		}
	}
}

// TestCloseEndsStalls checks that Close returns while an answer is stalled.
func TestCloseEndsStalls(t *testing.T) {
	s, err := Start(Config{StallAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.URL()+path(OpenAI), "application/json", strings.NewReader(body(OpenAI, "x", true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Logf("body after Close: %v", err)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Format: "gemini"}, {Signals: "smoke"}, {Latency: -1}} {
		if s, err := Start(cfg); err == nil {
			s.Close()
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

func TestBaseURL(t *testing.T) {
	o := start(t, Config{})
	a := start(t, Config{Format: Anthropic})
	if !strings.HasPrefix(o.URL(), "http://127.0.0.1:") || o.BaseURL() != o.URL()+"/v1" || a.BaseURL() != a.URL() {
		t.Errorf("URLs %q %q %q %q", o.URL(), o.BaseURL(), a.URL(), a.BaseURL())
	}
}
