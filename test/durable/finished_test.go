package durable_test

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/test/proc"
)

// TestOneThreadFinishedPerThread: a worker that froze mid-thread, was
// presumed lost (its thread placed again elsewhere) and then came back and
// ended that thread anyway adds no second thread.finished: every thread of
// the run has exactly one, with the status the record has.
func TestOneThreadFinishedPerThread(t *testing.T) {
	c := startCoord(t, coordOpts{})
	workers := map[string]*proc.Proc{}
	for _, id := range []string{"w1", "w2", "w3"} {
		workers[id] = c.startWorker(id, 1)
	}
	run := c.submit(map[string]any{"task": "Plan:\n- a\n- b", "agent": simAgent(3000)})

	// Until both helpers run: which worker has the root, which the helpers.
	var rootWorker string
	leafWorker := map[string]string{} // thread id -> worker
	for n := 1; len(leafWorker) < 2; n++ {
		if n > 40 {
			t.Fatal("the helpers did not start")
		}
		events, _, _ := c.sse(run, 0, n)
		rootWorker, leafWorker = "", map[string]string{}
		for _, e := range events {
			if e.e.Type == event.ThreadStarted && e.e.Depth == 0 {
				rootWorker = e.e.Worker
			} else if e.e.Type == event.ThreadStarted {
				leafWorker[e.e.ThreadID] = e.e.Worker
			}
		}
	}
	// Slots of one: the two helpers are on two workers, one not the root's.
	var frozen string
	for _, w := range leafWorker {
		if w != rootWorker {
			frozen = w
		}
	}
	p := workers[frozen]
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	rec := c.waitFinal(run)
	stoppedAt := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The thawed worker ends its stale thread, then reports itself idle.
	proc.WaitUntil(t, readyTimeout, "worker "+frozen+" is back and idle", func() bool {
		var ws []struct {
			ID       string
			Running  int       `json:"running"`
			LastSeen time.Time `json:"last_seen"`
		}
		if c.getJSON("/v1/workers", &ws) != http.StatusOK {
			return false
		}
		for _, w := range ws {
			if w.ID == frozen && w.Running == 0 && w.LastSeen.After(stoppedAt) {
				return true
			}
		}
		return false
	})

	finished := map[string][]event.Status{}
	for _, e := range c.streamEvents(run) {
		if e.Type == event.ThreadFinished {
			finished[e.ThreadID] = append(finished[e.ThreadID], e.Status)
		}
	}
	if len(rec.Threads) != 3 {
		t.Fatalf("record has %d threads, want 3: %+v", len(rec.Threads), rec.Threads)
	}
	for _, th := range rec.Threads {
		if got := finished[th.ID]; len(got) != 1 || got[0] != th.Status {
			t.Errorf("thread %s (%s, %s): thread.finished statuses %v, want exactly [%s]", th.Name, th.ID, th.Status, got, th.Status)
		}
	}
	if len(finished) != 3 {
		t.Errorf("thread.finished for %d threads, want 3: %v", len(finished), finished)
	}
}
