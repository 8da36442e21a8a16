package api

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/formica-run/formica/internal/event"
)

func TestAuth(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	h.fake.addRun("r1", event.Succeeded)
	for _, rt := range h.s.routes() {
		path := strings.ReplaceAll(rt.path, "{id}", "r1")
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			tests := []struct {
				name, auth, challenge string
			}{
				{"no header", "", `Bearer realm="formica"`},
				{"wrong token", "Bearer nope", `Bearer realm="formica", error="invalid_token"`},
				{"token of another scheme", "Basic " + testToken, `Bearer realm="formica"`},
				{"token prefix", "Bearer " + testToken[:5], `Bearer realm="formica", error="invalid_token"`},
			}
			for _, tt := range tests {
				h.token = ""
				r := h.do(rt.method, path, nil, "Authorization", tt.auth)
				if rt.public {
					if r.status == http.StatusUnauthorized {
						t.Errorf("%s: a public route asked for a token", tt.name)
					}
					continue
				}
				status, code, _ := errorOf(t, r)
				if status != http.StatusUnauthorized || code != "unauthorized" {
					t.Errorf("%s: got %d %s, want 401 unauthorized", tt.name, status, code)
				}
				if got := r.header.Get("WWW-Authenticate"); got != tt.challenge {
					t.Errorf("%s: WWW-Authenticate = %q, want %q", tt.name, got, tt.challenge)
				}
			}
			h.token = ""
			r := h.do(rt.method, path, nil, "Authorization", "bearer "+testToken) // scheme is case-insensitive
			if r.status == http.StatusUnauthorized {
				t.Errorf("the right token was refused: %s", r.body)
			}
		})
	}
}

func TestUnknownRoutes(t *testing.T) {
	h := newHarness(t, Config{})
	status, code, _ := errorOf(t, h.do("GET", "/v2/nothing", nil))
	if status != 404 || code != "not_found" {
		t.Errorf("unknown path: got %d %s", status, code)
	}
	r := h.do("DELETE", "/v1/runs", nil)
	status, code, _ = errorOf(t, r)
	if status != 405 || code != "method_not_allowed" {
		t.Errorf("unknown method: got %d %s", status, code)
	}
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Errorf("Allow = %q", allow)
	}
}

func TestBrowserProtection(t *testing.T) {
	h := newHarness(t, Config{})
	// DNS rebinding: a page's own name resolving to 127.0.0.1.
	status, code, _ := errorOf(t, h.do("GET", "/v1/runs", nil, "Host", "evil.example:8080"))
	if status != http.StatusForbidden || code != "forbidden" {
		t.Errorf("foreign host: got %d %s, want 403 forbidden", status, code)
	}
	for _, host := range []string{"localhost:8080", "127.0.0.1", "[::1]:9"} {
		if r := h.do("GET", "/v1/runs", nil, "Host", host); r.status != 200 {
			t.Errorf("host %s: %d %s", host, r.status, r.body)
		}
	}
	// A cross-site page posting a run.
	status, code, _ = errorOf(t, h.do("POST", "/v1/runs", `{"task":"x"}`, "Sec-Fetch-Site", "cross-site"))
	if status != http.StatusForbidden || code != "forbidden" {
		t.Errorf("cross-site POST: got %d %s, want 403 forbidden", status, code)
	}
	if len(h.fake.submitted) != 0 {
		t.Errorf("submitted %+v", h.fake.submitted)
	}

	// With a token any host name will do (behind a proxy, say).
	ht := newHarness(t, Config{Token: testToken})
	if r := ht.do("GET", "/v1/runs", nil, "Host", "formica.example.com"); r.status != 200 {
		t.Errorf("with a token: %d %s", r.status, r.body)
	}
}

func TestPanicAndAccessLog(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	h.fake.panics = true
	status, code, msg := errorOf(t, h.do("GET", "/v1/workers", nil))
	if status != 500 || code != "internal" || msg != "internal error" {
		t.Errorf("panic: got %d %s %q", status, code, msg)
	}
	if r := h.do("GET", "/healthz", nil); r.status != 200 {
		t.Errorf("after a panic: %d", r.status)
	}
	out := logs.String()
	for _, want := range []string{"handler panicked", "workers exploded",
		"msg=\"http request\" method=GET path=/v1/workers status=500", "path=/healthz status=200"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCORSOrigins: a page of an allowed origin may call the API from a
// browser: its preflight is answered and its requests, cross-site ones
// that change something included, pass and carry the CORS headers. Any
// other origin gets no CORS header and its cross-site POST stays refused.
func TestCORSOrigins(t *testing.T) {
	const app = "https://ops.example.com"
	h := newHarness(t, Config{Token: testToken, CORSOrigins: []string{app}})

	pre := h.do("OPTIONS", "/v1/runs", nil, "Origin", app, "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization, content-type")
	if pre.status != http.StatusNoContent || pre.header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight: %d %v", pre.status, pre.header)
	}
	post := h.do("POST", "/v1/runs", `{"task":"x"}`, "Origin", app, "Sec-Fetch-Site", "cross-site")
	if post.status != http.StatusAccepted || post.header.Get("Access-Control-Allow-Origin") != app {
		t.Fatalf("POST from %s: %d %v %s", app, post.status, post.header, post.body)
	}

	const other = "https://evil.example.com"
	if r := h.do("GET", "/v1/runs", nil, "Origin", other); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET from %s carries %q", other, r.header.Get("Access-Control-Allow-Origin"))
	}
	status, code, _ := errorOf(t, h.do("POST", "/v1/runs", `{"task":"y"}`, "Origin", other, "Sec-Fetch-Site", "cross-site"))
	if status != http.StatusForbidden || code != "forbidden" {
		t.Errorf("cross-site POST from %s: %d %s, want 403 forbidden", other, status, code)
	}
	if _, err := New(Config{CORSOrigins: []string{"not an origin"}}, newFake()); !errors.Is(err, ErrConfig) {
		t.Errorf("a bad origin: %v, want ErrConfig", err)
	}
}
