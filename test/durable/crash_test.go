package durable_test

import (
	"fmt"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// TestCoordinatorKilledTwice: 100 runs are submitted over the HTTP API
// while the coordinator is killed with SIGKILL and restarted twice on the
// same data directory and ports. Every run ends up with exactly one final
// record, succeeded; runs the dead coordinators held ran again (attempts
// >= 2); and no run was started again once its final record was stored.
func TestCoordinatorKilledTwice(t *testing.T) {
	t.Parallel()
	const runs = 100
	c := startCoord(t, coordOpts{maxRuns: 8})
	c.startWorker("w1", 12)
	c.startWorker("w2", 12)

	// The submitter posts run-000..run-099, one every 100ms, each until it
	// is accepted: while the coordinator (and with it the API) is down, it
	// tries again. The same id twice is one run, so a lost answer is safe.
	var accepted atomic.Int32
	submitted := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(submitted)
		for i := range runs {
			body := map[string]any{"id": fmt.Sprintf("run-%03d", i), "task": fmt.Sprintf("Job %d:\n- a\n- b", i), "agent": simAgent(150)}
			for {
				code, _, err := c.do(http.MethodPost, "/v1/runs", body)
				if err == nil && code == http.StatusAccepted {
					break
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			accepted.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// Kill the coordinator while runs are in flight, twice. Each run it
	// held is delivered again after the queue's AckWait (2s) and runs
	// again: it ends within a few seconds of the restart, with a second
	// attempt. (A run listed as running just before the kill may have
	// finished before it, in its first attempt.) Between the kills the CLI
	// lists the runs: clients open the run store too, and none may change
	// the coordinator's settings (AckWait included).
	for kill, after := range []int32{15, 50} {
		var running []record.Run
		proc.WaitUntil(t, runTimeout, fmt.Sprintf("%d runs accepted and 3 running", after), func() bool {
			running = nil
			c.getJSON("/v1/runs?status=running&limit=1000", &running)
			return accepted.Load() >= after && len(running) >= 3
		})
		c.kill9()
		killed, atKill := time.Now(), accepted.Load()
		c.restart()
		held := 0
		for _, was := range running {
			// AckWait, worker reconnects (up to 3s) and the run itself.
			r := c.waitFinalWithin(was.RunID, 15*time.Second)
			switch {
			case r.Attempts >= 2:
				held++
			case !r.FinishedAt.Before(killed):
				t.Errorf("run %s was running at the kill and finished after it (%v) in its first attempt", r.RunID, r.FinishedAt.Sub(killed))
			}
		}
		if held == 0 {
			t.Fatalf("kill %d caught none of the %d runs in flight", kill+1, len(running))
		}
		t.Logf("kill %d: with %d runs accepted; the %d runs it held were done %v after it", kill+1, atKill, held, time.Since(killed).Round(time.Millisecond))
		if kill == 0 {
			var list []record.Run
			c.cliJSON(&list, "runs", "--status", "succeeded", "--limit", "1000", "--json")
		}
	}
	select {
	case <-submitted:
	case <-time.After(runTimeout):
		t.Fatalf("only %d of %d runs were accepted", accepted.Load(), runs)
	}

	var final []record.Run
	proc.WaitUntil(t, 2*runTimeout, fmt.Sprintf("%d final records", runs), func() bool {
		final = nil
		c.getJSON("/v1/runs?limit=1000", &final)
		for _, r := range final {
			if !r.Status.Final() {
				return false
			}
		}
		return len(final) >= runs
	})
	var viaCLI []record.Run
	c.cliJSON(&viaCLI, "runs", "--json", "--limit", "1000")
	// Workers and the CLI open the run store too, but as clients: the
	// coordinator's --queue-ack-wait stays in force.
	if got, _ := c.queue(); got != 2*time.Second {
		t.Errorf("the queue's AckWait is %v after workers and CLI commands, want the coordinator's %s", got, ackWait)
	}

	byID := map[string]record.Run{}
	retried := 0
	for _, list := range [][]record.Run{final, viaCLI} {
		if len(list) != runs {
			t.Errorf("%d records, want %d", len(list), runs)
		}
	}
	for _, r := range viaCLI {
		if _, dup := byID[r.RunID]; dup {
			t.Errorf("run %s listed twice", r.RunID)
		}
		byID[r.RunID] = r
		const want = "a: done: a\nb: done: b"
		if r.Status != event.Succeeded || r.Output != want {
			t.Errorf("run %s: %s (%s), output %q", r.RunID, r.Status, r.Error, r.Output)
		}
		if r.Attempts >= 2 {
			retried++
		}
		if r.Attempts < 1 || r.FinishedAt.Before(r.StartedAt) {
			t.Errorf("run %s: %d attempts, started %v, finished %v", r.RunID, r.Attempts, r.StartedAt, r.FinishedAt)
		}
	}
	for i := range runs {
		if _, ok := byID[fmt.Sprintf("run-%03d", i)]; !ok {
			t.Errorf("run-%03d has no record", i)
		}
	}
	if retried == 0 {
		t.Errorf("no run has more than one attempt; the kills should have caught some mid-run")
	}

	// The events stream: a run may start more than once (its coordinator
	// died), but once its final record is stored it never starts again,
	// and its last run event is a run.finished.
	started, finished := map[string]int{}, map[string]int{}
	last := map[string]event.Event{}
	for _, e := range c.streamRunEvents() {
		r, ok := byID[e.RunID]
		if !ok {
			continue
		}
		switch e.Type {
		case event.RunStarted:
			started[e.RunID]++
			if e.Time.After(r.FinishedAt) {
				t.Errorf("run %s started again at %v, after its final record (%v)", e.RunID, e.Time, r.FinishedAt)
			}
		case event.RunFinished:
			finished[e.RunID]++
		}
		last[e.RunID] = e
	}
	var twice []string
	for id, r := range byID {
		if started[id] < 1 || started[id] > r.Attempts {
			t.Errorf("run %s: %d run.started events, %d attempts recorded", id, started[id], r.Attempts)
		}
		if e := last[id]; e.Type != event.RunFinished || e.Status != event.Succeeded {
			t.Errorf("run %s: last run event %s (%s), want run.finished succeeded", id, e.Type, e.Status)
		}
		if finished[id] > 1 {
			twice = append(twice, fmt.Sprintf("%s(%d)", id, finished[id]))
		}
	}
	sort.Strings(twice)
	t.Logf("%d runs, %d with attempts >= 2; runs that finished more than once before their record was stored: %v", len(byID), retried, twice)

	// One retried run's full event replay over the API ends with its run.finished.
	for id, r := range byID {
		if r.Attempts < 2 {
			continue
		}
		events, code, _ := c.sse(id, 0, 0)
		if code != http.StatusOK || len(events) == 0 || events[len(events)-1].e.Type != event.RunFinished {
			t.Errorf("events of retried run %s: status %d, %d events", id, code, len(events))
		} else if n := count(events, event.RunStarted); n < 1 {
			t.Errorf("events of retried run %s: %d run.started", id, n)
		}
		break
	}
}
