package ops

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestProbesAndMetrics(t *testing.T) {
	var notReady atomic.Bool
	s, err := Start(Config{Addr: "127.0.0.1:0",
		Ready: func(context.Context) error {
			if notReady.Load() {
				return errors.New("draining")
			}
			return nil
		},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "m 1\n") }),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path string
		code int
		body string
	}{{"/healthz", 200, "ok"}, {"/readyz", 200, "ready"}, {"/metrics", 200, "m 1"}, {"/v1/runs", 404, ""}} {
		code, body := get(c.path)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %q, want %d with %q", c.path, code, body, c.code, c.body)
		}
	}
	notReady.Store(true)
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Errorf("not ready: %d %q", code, body)
	}
	resp, err := http.Post("http://"+s.Addr()+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d", resp.StatusCode)
	}
}
