package durable_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// TestCancel: with one run slot (--max-runs 1), a long run holds it and a
// second run waits in the queue. `formica cancel` of the queued run ends it
// at once and it never starts, not even once the slot is free; `formica
// cancel` of the running run ends its whole tree cancelled, and the
// `formica submit --wait` following it exits 1.
func TestCancel(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{maxRuns: 1})
	c.startWorker("w1", 4)
	long := c.startCLI("submit", "--id", "long-run", "--wait", "--agent", simAgentFile(t, 2000), "Long:\n- a\n- b")
	c.waitStatus("long-run", event.Running)
	queued := c.submit(map[string]any{"id": "queued-run", "task": "Queued:\n- x", "agent": simAgent(0)})
	if r := c.record(queued); r.Status != record.Queued {
		t.Fatalf("run %s is %s, want queued behind long-run", queued, r.Status)
	}

	if r := c.cli("cancel", queued); r.code != 0 {
		t.Fatalf("formica cancel %s: exit %d: %s", queued, r.code, r.stderr)
	}
	if r := c.record(queued); r.Status != event.Cancelled || r.Attempts != 0 || r.FinishedAt.IsZero() {
		t.Errorf("queued run after cancel: %s, %d attempts, finished %v; want cancelled, never started", r.Status, r.Attempts, r.FinishedAt)
	}
	// Following it ends at once: it has no events and never will.
	t0 := time.Now()
	if r := c.cli("watch", queued); r.code != 1 || !strings.Contains(r.stderr, "cancelled") {
		t.Errorf("formica watch %s: exit %d, stderr %q; want 1 and cancelled", queued, r.code, r.stderr)
	}
	if _, code, _ := c.sse(queued, 0, 0); code != http.StatusNoContent {
		t.Errorf("events of the cancelled queued run: status %d, want 204", code)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("following the cancelled queued run took %v", d)
	}

	if r := c.record("long-run"); r.Status != event.Running {
		t.Fatalf("long-run is %s before its cancel", r.Status)
	}
	if r := c.cli("cancel", "long-run"); r.code != 0 {
		t.Fatalf("formica cancel long-run: exit %d: %s", r.code, r.stderr)
	}
	if code := long.Wait(t, runTimeout); code != 1 {
		t.Errorf("formica submit --wait of the cancelled run: exit %d, want 1\nstdout: %s", code, long.Stdout.String())
	}
	rec := c.waitFinal("long-run")
	if rec.Status != event.Cancelled {
		t.Errorf("long-run: %s (%s), want cancelled", rec.Status, rec.Error)
	}
	for _, th := range rec.Threads {
		if th.Status != event.Cancelled {
			t.Errorf("long-run thread %s: %s, want cancelled", th.Name, th.Status)
		}
	}
	if r := c.cli("cancel", "long-run"); r.code == 0 || !strings.Contains(r.stderr, "already cancelled") {
		t.Errorf("cancelling a finished run: exit %d, stderr %q; want an error", r.code, r.stderr)
	}

	// The slot is free: the queued run is taken from the queue and dropped
	// without running.
	proc.WaitUntil(t, runTimeout, "the queue is empty", func() bool {
		_, n := c.queue()
		return n == 0
	})
	if r := c.record(queued); r.Status != event.Cancelled || r.Attempts != 0 {
		t.Errorf("queued run after the slot freed: %s, %d attempts", r.Status, r.Attempts)
	}
	if _, code, _ := c.sse(queued, 0, 0); code != http.StatusNoContent {
		t.Errorf("events of the cancelled queued run after the slot freed: status %d, want 204 (no run.started)", code)
	}
}

// TestCancelRightAfterSubmit: 40 runs, each cancelled through the API the
// moment its submission is answered (some still queued, some being taken
// by the coordinator, some just started): each cancel is answered 202 and
// every run ends cancelled, none succeeded.
func TestCancelRightAfterSubmit(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 16)
	const n = 40
	ids := make([]string, n)
	for i := range ids {
		ids[i] = c.submit(map[string]any{"id": fmt.Sprintf("cancel-now-%d", i), "task": "Work:\n- a\n- b", "agent": simAgent(500)})
		c.call(http.StatusAccepted, http.MethodPost, "/v1/runs/"+ids[i]+"/cancel", nil, nil)
	}
	for _, id := range ids {
		if r := c.waitFinal(id); r.Status != event.Cancelled {
			t.Errorf("run %s: %s (%s) after its cancel was accepted; want cancelled", id, r.Status, r.Error)
		}
	}
}
