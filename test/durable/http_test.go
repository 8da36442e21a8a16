package durable_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/formica-run/formica/test/proc"
)

// TestAPIBeyondLoopbackNeedsToken: --http on 0.0.0.0 without a token is
// refused at start with a clear error. With a token (--http-token or
// FORMICA_HTTP_TOKEN) the coordinator starts, and a request without the
// token or with a wrong one gets 401, with it 200; the probes need none.
func TestAPIBeyondLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	port := proc.FreePorts(t, 1)[0]
	p := proc.Start(t, "coordinator without token", bin.coordinator, "--data-dir", t.TempDir(), "--nats-listen", "",
		"--http", fmt.Sprintf("0.0.0.0:%d", port))
	if code := p.Wait(t, readyTimeout); code == 0 {
		t.Fatalf("the coordinator started on 0.0.0.0 without a token")
	}
	stderr := p.Stderr.String()
	for _, want := range []string{"reachable from other machines; set a token", "--http-token", "$FORMICA_HTTP_TOKEN"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	// Refused before anything started: no NATS server, no coordinator
	// taking queued runs.
	if strings.Contains(stderr, "coordinator started") || strings.Contains(stderr, "Starting nats-server") {
		t.Errorf("the coordinator started parts of itself before refusing:\n%s", stderr)
	}

	for _, flag := range []bool{true, false} {
		c := startCoord(t, coordOpts{httpHost: "0.0.0.0", token: "s3cret-token", tokenFlag: flag})
		for _, probe := range []struct {
			path, auth string
			want       int
		}{
			{"/v1/runs", "", http.StatusUnauthorized},
			{"/v1/runs", "Bearer wrong-token", http.StatusUnauthorized},
			{"/v1/runs", "Basic czNjcmV0LXRva2Vu", http.StatusUnauthorized},
			{"/v1/runs", "Bearer s3cret-token", http.StatusOK},
			{"/v1/workers", "Bearer s3cret-token", http.StatusOK},
			{"/healthz", "", http.StatusOK},
			// No worker has registered and the coordinator hosts none.
			{"/readyz", "", http.StatusServiceUnavailable},
		} {
			req, _ := http.NewRequest(http.MethodGet, c.api+probe.path, nil)
			if probe.auth != "" {
				req.Header.Set("Authorization", probe.auth)
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", probe.path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != probe.want {
				t.Errorf("token by flag %v: GET %s with %q: %d %s, want %d", flag, probe.path, probe.auth, resp.StatusCode, body, probe.want)
			}
			if probe.want == http.StatusUnauthorized && (resp.Header.Get("WWW-Authenticate") == "" || !bytes.Contains(body, []byte(`"unauthorized"`))) {
				t.Errorf("401 without WWW-Authenticate or error code: %v %s", resp.Header, body)
			}
		}
		c.kill9()
	}
}

// TestOversizedSubmissionIs413: a POST /v1/runs body over 1 MiB is refused
// with 413 too_large, whether its length is announced or streamed, and no
// run is created.
func TestOversizedSubmissionIs413(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	big, _ := json.Marshal(map[string]any{"task": strings.Repeat("x", 1<<20+1)})
	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader(big)
		if chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, c.api+"/v1/runs", body)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("POST /v1/runs (chunked %v): %v", chunked, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string }
		}
		json.Unmarshal(data, &e)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || e.Error.Code != "too_large" {
			t.Errorf("POST /v1/runs of %d bytes (chunked %v): %d %s, want 413 too_large", len(big), chunked, resp.StatusCode, data)
		}
	}
	var runs []json.RawMessage
	c.call(http.StatusOK, http.MethodGet, "/v1/runs", nil, &runs)
	if len(runs) != 0 {
		t.Errorf("%d runs after refused submissions", len(runs))
	}
	// The server is still well: a small submission goes through.
	c.startWorker("w1", 2)
	id := c.submit(map[string]any{"task": "small", "agent": simAgent(0)})
	if r := c.waitFinal(id); r.Output != "done: small" {
		t.Errorf("small run after the refusals: %s %q", r.Status, r.Output)
	}
}
