package durable_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/formica-run/formica/test/proc"
)

// TestVisibleWaits: with no worker, /readyz is not ready and says why,
// `submit --wait` says no worker is registered and its tree shows the root
// waiting for a worker; once a worker joins the run goes on and /readyz
// counts it.
func TestVisibleWaits(t *testing.T) {
	c := startCoord(t, coordOpts{})
	code, body, err := c.do(http.MethodGet, "/readyz", nil)
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(string(body), "no live worker") {
		t.Fatalf("/readyz without a worker: %d %s %v, want 503 naming the missing worker", code, body, err)
	}
	p := c.startCLI("submit", "--id", "wait-1", "--wait", "Plan:\n- a")
	p.WaitLog(t, "waiting for a worker", cliTimeout)
	if !strings.Contains(p.Stderr.String(), "formica: no worker is registered") {
		t.Errorf("no notice of the missing worker:\n%s", p.Stderr.String())
	}
	c.startWorker("w1", 4)
	if code := p.Wait(t, cliTimeout); code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, p.Stderr.String())
	}
	var ready struct {
		Status  string `json:"status"`
		Workers *int   `json:"workers"`
	}
	c.call(http.StatusOK, http.MethodGet, "/readyz", nil, &ready)
	if ready.Status != "ready" || ready.Workers == nil || *ready.Workers != 1 {
		t.Errorf("/readyz with a worker: %+v, want ready with 1 worker", ready)
	}
}

// TestHarnessCwdOfSubmittedRuns: a submitted agent's harness.cwd is taken
// relative to the coordinator's --cwd, and one leading outside it fails the
// run instead of running there (or, as before, being ignored).
func TestHarnessCwdOfSubmittedRuns(t *testing.T) {
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 4)
	agent := func(cwd string) map[string]any {
		a := simAgent(0)
		a["harness"] = map[string]any{"cwd": cwd}
		return a
	}
	if err := os.MkdirAll(filepath.Join(c.cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	inside := c.submit(map[string]any{"task": "Plan:\n- a", "agent": agent("sub")})
	outside := c.submit(map[string]any{"task": "Plan:\n- a", "agent": agent("../elsewhere")})
	if r := c.waitFinal(inside); r.Status != "succeeded" {
		t.Errorf("harness.cwd sub: %s %s", r.Status, r.Error)
	}
	if r := c.waitFinal(outside); r.Status != "failed" || !strings.Contains(r.Error, "outside the coordinator's --cwd") {
		t.Errorf("harness.cwd ../elsewhere: %s %q, want a failure naming --cwd", r.Status, r.Error)
	}
}

// TestRunOverNATSIsRecorded: `formica run --nats` keeps a record like a
// submitted run's (one attempt), which get, runs and the API show.
func TestRunOverNATSIsRecorded(t *testing.T) {
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 4)
	r := c.cli("run", "--nats", c.url, "--json", "Plan:\n- a\n- b")
	if r.code != 0 {
		t.Fatalf("run --nats: exit %d\n%s", r.code, r.stderr)
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.RunID == "" {
		t.Fatalf("run --nats --json: %v\n%s", err, r.stdout)
	}
	rec := c.record(out.RunID)
	if rec.Status != "succeeded" || rec.Attempts != 1 || len(rec.Threads) != 3 || rec.Task == "" {
		t.Errorf("record of the run: %+v", rec)
	}
	if g := c.cli("get", out.RunID); g.code != 0 || !strings.Contains(g.stdout, "succeeded") {
		t.Errorf("get: exit %d\n%s%s", g.code, g.stdout, g.stderr)
	}
}

// TestDeniedAskWithoutTerminal: an `ask` call in `formica run` without a
// terminal is denied, and stderr says so and how to choose.
func TestDeniedAskWithoutTerminal(t *testing.T) {
	script := writeFile(t, "ask.yaml", "responses:\n  - tool_calls: [{id: c1, name: bash, arguments: {command: echo hi}}]\n  - text: gave up\n")
	p := proc.StartWith(t, proc.Options{}, "formica run", bin.formica, "run", "--model", "scripted:"+script, "--cwd", t.TempDir(), "say hi")
	if code := p.Wait(t, cliTimeout); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.Stderr.String())
	}
	if want := "formica: approval needed for bash: denied (no terminal; use --approve allow|deny)"; !strings.Contains(p.Stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, p.Stderr.String())
	}
}

// TestBackToBackSubmitWait: 200 fast `submit --wait` runs in a row (eight
// at a time) each print their whole tree and the totals line: none loses
// the events of a run that ends right after it was queued.
func TestBackToBackSubmitWait(t *testing.T) {
	c := startCoord(t, coordOpts{extra: []string{"--max-runs", "8"}})
	c.startWorker("w1", 32)
	c.clientCreds() // issued once, before the commands share it
	// A race-built binary sleeps a second at exit by default so that other
	// goroutines can finish a report; 200 such exits would be most of this
	// test's time. Races are still detected and reported where they happen.
	c.cliEnv = []string{"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 200 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := c.cli("submit", "--id", fmt.Sprintf("fast-%d", i), "--wait", "Plan:\n- a\n- b")
			for _, want := range []string{"✓ formica (depth 0) succeeded", "✓ a (depth 1) succeeded", "✓ b (depth 1) succeeded", "threads: 3 done, 0 running, 0 failed, 0 cancelled, 0 refused"} {
				if r.code != 0 || !strings.Contains(r.stderr, want) {
					t.Errorf("run %d: exit %d, stderr lacks %q:\n%s", i, r.code, want, r.stderr)
					return
				}
			}
		})
	}
	wg.Wait()
}
