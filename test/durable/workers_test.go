package durable_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/test/proc"
)

// TestWorkersAndWatch: `formica workers --json` lists each worker with its
// id, host, slots, running threads and when it was last seen, running
// counting the helpers of a run in flight; `formica watch` of a finished
// run replays its tree on stderr, prints its output and exits 0.
func TestWorkersAndWatch(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 3)
	c.startWorker("w2", 5)

	type worker struct {
		ID       string    `json:"id"`
		Host     string    `json:"host"`
		Slots    *int      `json:"slots"`
		Running  *int      `json:"running"`
		LastSeen time.Time `json:"last_seen"`
	}
	list := func() map[string]worker {
		t.Helper()
		var raw []map[string]json.RawMessage
		c.cliJSON(&raw, "workers", "--json")
		out := map[string]worker{}
		for _, r := range raw {
			for _, key := range []string{"id", "host", "slots", "running", "last_seen"} {
				if _, ok := r[key]; !ok {
					t.Errorf("a worker without %q: %v", key, r)
				}
			}
			b, _ := json.Marshal(r)
			var w worker
			json.Unmarshal(b, &w)
			out[w.ID] = w
		}
		return out
	}
	ws := list()
	if len(ws) != 2 {
		t.Fatalf("formica workers lists %d workers, want 2: %v", len(ws), ws)
	}
	for id, slots := range map[string]int{"w1": 3, "w2": 5} {
		w := ws[id]
		if w.Host == "" || w.Slots == nil || *w.Slots != slots || w.Running == nil || *w.Running != 0 ||
			time.Since(w.LastSeen) > 5*time.Second || time.Until(w.LastSeen) > time.Second {
			t.Errorf("worker %s: %+v; want host, %d slots, 0 running, seen just now", id, w, slots)
		}
	}

	// A run with three helpers of 2.5s each: while they run, the workers
	// report them.
	id := c.submit(map[string]any{"task": "Three:\n- x\n- y\n- z", "agent": simAgent(2500)})
	busy := 0
	proc.WaitUntil(t, runTimeout, "formica workers shows the three helpers running", func() bool {
		busy = 0
		for _, w := range list() {
			if w.Running != nil {
				busy += *w.Running
			}
		}
		return busy >= 3
	})
	rec := c.waitFinal(id)
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s (%s)", id, rec.Status, rec.Error)
	}

	r := c.cli("watch", id)
	if r.code != 0 {
		t.Fatalf("formica watch %s: exit %d: %s", id, r.code, r.stderr)
	}
	if got := strings.TrimSuffix(r.stdout, "\n"); got != rec.Output {
		t.Errorf("formica watch stdout %q, want the output %q", got, rec.Output)
	}
	for _, name := range []string{"formica", "x", "y", "z"} {
		depth := 1
		if name == "formica" {
			depth = 0
		}
		started := fmt.Sprintf("▸ %s (depth %d) started on w", name, depth)
		finished := fmt.Sprintf("✓ %s (depth %d) succeeded", name, depth)
		if !strings.Contains(r.stderr, started) || !strings.Contains(r.stderr, finished) {
			t.Errorf("formica watch stderr lacks %q or %q:\n%s", started, finished, r.stderr)
		}
	}
}

// TestWorkersShowSandbox: a worker started with --sandbox off warns and says
// `sandbox: off` in its heartbeat, in GET /v1/workers and in `formica
// workers`; a default worker says on. A worker asked to run tools as root
// refuses to start.
func TestWorkersShowSandbox(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 1)
	off := c.startWorker("w2", 1, "--sandbox", "off")
	if !strings.Contains(off.Stderr.String(), "sandbox off") {
		t.Errorf("worker --sandbox off logged no warning:\n%s", off.Stderr.String())
	}
	var ws []struct{ ID, Sandbox string }
	c.getJSON("/v1/workers", &ws)
	got := map[string]string{}
	for _, w := range ws {
		got[w.ID] = w.Sandbox
	}
	if got["w1"] != "on" || got["w2"] != "off" {
		t.Errorf("GET /v1/workers sandbox fields %v; want w1 on, w2 off", got)
	}
	r := c.cli("workers")
	lines := strings.Split(r.stdout, "\n")
	if r.code != 0 || !strings.Contains(lines[0], "SANDBOX") {
		t.Fatalf("formica workers: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > 5 && (f[0] == "w1" && f[5] != "on" || f[0] == "w2" && f[5] != "off") {
			t.Errorf("formica workers row %q", l)
		}
	}

	root := proc.Start(t, "worker as root", bin.worker, "--nats", c.url, "--tool-user", "0")
	if code := root.Wait(t, readyTimeout); code == 0 || !strings.Contains(root.Stderr.String(), "may not run as root") {
		t.Errorf("worker --tool-user 0: exit %d\n%s", code, root.Stderr.String())
	}
}
