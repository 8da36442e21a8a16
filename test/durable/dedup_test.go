package durable_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// TestSameIDIsOneRun: one run id submitted twice over the API and twice by
// `formica submit --id`, both while the run is queued or running and once
// more after it has finished, is one run: one record, one run.started, one
// attempt.
func TestSameIDIsOneRun(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 4)
	const id = "same-id-1"
	body := map[string]any{"id": id, "task": "Twice:\n- a\n- b", "agent": simAgent(200)}
	agent := simAgentFile(t, 200)
	submitCLI := func() {
		t.Helper()
		r := c.cli("submit", "--id", id, "--agent", agent, "Twice:\n- a\n- b")
		if r.code != 0 || strings.TrimSpace(r.stdout) != id {
			t.Fatalf("formica submit --id %s: exit %d, stdout %q, stderr %s", id, r.code, r.stdout, r.stderr)
		}
	}
	for range 2 {
		if got := c.submit(body); got != id {
			t.Fatalf("POST /v1/runs: run %q, want %q", got, id)
		}
	}
	submitCLI()
	submitCLI()
	rec := c.waitFinal(id)
	if got := c.submit(body); got != id {
		t.Fatalf("POST /v1/runs after the run ended: run %q, want %q", got, id)
	}
	submitCLI()

	events, code, ended := c.sse(id, 0, 0)
	if code != http.StatusOK || !ended {
		t.Fatalf("GET /v1/runs/%s/events: status %d, ended %v", id, code, ended)
	}
	if rec.Status != event.Succeeded || rec.Attempts != 1 {
		t.Errorf("record: %s (%s), %d attempts; want succeeded, 1 attempt", rec.Status, rec.Error, rec.Attempts)
	}
	if n, m := count(events, event.RunStarted), count(events, event.RunFinished); n != 1 || m != 1 {
		t.Errorf("%d run.started and %d run.finished events, want 1 each", n, m)
	}
	// Nothing is left to start later either: the queue is empty and the
	// record is as it was.
	if _, n := c.queue(); n != 0 {
		t.Errorf("the queue holds %d submissions after the run ended", n)
	}
	var runs []record.Run
	c.cliJSON(&runs, "runs", "--json", "--limit", "1000")
	if len(runs) != 1 || runs[0].RunID != id || runs[0].Attempts != 1 || !runs[0].FinishedAt.Equal(rec.FinishedAt) {
		t.Errorf("runs after resubmitting: %+v; want only %s, 1 attempt, unchanged", runs, id)
	}
}
