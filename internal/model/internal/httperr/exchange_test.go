package httperr

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// through sends one GET to a server running h, through x's middleware, and
// reads the whole body as an SDK would.
func through(t *testing.T, x *Exchange, h http.HandlerFunc) (string, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Middleware(req, srv.Client().Do)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

func TestExchange(t *testing.T) {
	long := strings.Repeat("x", maxBody+10)
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		body    string // what the caller reads
		kept    string // what x keeps
		wait    time.Duration
		status  int
		readErr bool
	}{
		{
			name: "error body kept and still readable",
			h: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(429)
				_, _ = io.WriteString(w, `{"error":"slow down"}`)
			},
			body: `{"error":"slow down"}`, kept: `{"error":"slow down"}`, wait: 3 * time.Second, status: 429,
		},
		{
			name: "error body bounded",
			h: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(500)
				_, _ = io.WriteString(w, long)
			},
			body: long[:maxBody], kept: long[:maxBody], status: 500,
		},
		{
			name: "success body passed through",
			h: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `{"ok":true}`)
			},
			body: `{"ok":true}`, status: 200,
		},
		{
			name: "success body cut short",
			h: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				_, _ = io.WriteString(w, `{"trunc`)
				rc := http.NewResponseController(w)
				_ = rc.Flush()
				if conn, _, err := rc.Hijack(); err == nil {
					_ = conn.Close()
				}
			},
			body: `{"trunc`, status: 200, readErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var x Exchange
			body, err := through(t, &x, tc.h)
			if (err != nil) != tc.readErr {
				t.Errorf("reading the body: %v", err)
			}
			if diff := cmp.Diff(tc.body, body); diff != "" {
				t.Errorf("body read (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.kept, string(x.body)); diff != "" {
				t.Errorf("body kept (-want +got):\n%s", diff)
			}
			if x.status != tc.status {
				t.Errorf("status = %d, want %d", x.status, tc.status)
			}
			if got := x.retryAfter(); got != tc.wait {
				t.Errorf("RetryAfter = %v, want %v", got, tc.wait)
			}
			if (x.readErr != nil) != tc.readErr {
				t.Errorf("readErr = %v, want one: %t", x.readErr, tc.readErr)
			}
		})
	}
}

func TestExchangeNoResponse(t *testing.T) {
	var x Exchange
	refused := errors.New("connection refused")
	req := httptest.NewRequest(http.MethodGet, "http://example.invalid", nil)
	res, err := x.Middleware(req, func(*http.Request) (*http.Response, error) { return nil, refused })
	if res != nil || err != refused {
		t.Errorf("Middleware = %v, %v; want nil, %v", res, err, refused)
	}
	if x.status != 0 || x.retryAfter() != 0 {
		t.Errorf("exchange filled without a response: %+v", x)
	}
}

func TestExchangePlainJSON(t *testing.T) {
	for _, tc := range []struct {
		name, contentType string
		status            int
		want              bool
	}{
		{"JSON", "application/json", 200, true},
		{"JSON with a charset", "application/json; charset=utf-8", 200, true},
		{"event stream", "text/event-stream; charset=utf-8", 200, false},
		{"no content type", "", 200, false},
		{"JSON error", "application/json", 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = []string{tc.contentType}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, `{"ok":true}`)
			}))
			defer srv.Close()
			var x Exchange
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := x.Middleware(req, srv.Client().Do)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, ok := x.PlainJSON()
			if ok != tc.want {
				t.Fatalf("PlainJSON ok = %t, want %t", ok, tc.want)
			}
			if !ok {
				return
			}
			b, err := io.ReadAll(body)
			if err != nil || string(b) != `{"ok":true}` {
				t.Errorf("PlainJSON body = %q, %v", b, err)
			}
		})
	}
}

// Every body read that brings bytes tells the idle watchdog, and so do the
// headers.
func TestExchangeKicksWatchdog(t *testing.T) {
	kicks := 0
	x := Exchange{kick: func() { kicks++ }}
	body, err := through(t, &x, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for range 3 {
			_, _ = io.WriteString(w, "piece")
			_ = rc.Flush()
			time.Sleep(10 * time.Millisecond)
		}
	})
	if err != nil || body != "piecepiecepiece" {
		t.Fatalf("body %q, %v", body, err)
	}
	// Pieces may arrive together, so only the headers' and one read's
	// kicks are certain.
	if kicks < 2 {
		t.Errorf("%d kicks, want one for the headers and one per read", kicks)
	}
}
