package durable_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/wire"
	"github.com/formica-run/formica/test/proc"
)

// TestWatchOutlastsForgedRunEvents: `formica watch` follows a live run
// held on an approval while attackers with a worker's and with a client's
// credentials publish forged run.finished (and run.started) events for it,
// as JSON like the coordinator's. The server refuses each publish, no
// forged event reaches the run's stream, watch stays up, and it exits 0
// with the run's real output once the approval lets the run finish; the
// coordinator and worker stay up.
func TestWatchOutlastsForgedRunEvents(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	w := c.startWorker("w1", 4)
	script, _ := approvalScript(t, "watch")
	run := c.submit(map[string]any{"task": "root-watch", "model": "scripted:" + script})
	ask := c.waitApproval(run)

	watch := c.startCLI("watch", run, "--no-tty")
	// The replayed history reaches the helper waiting for the approval.
	proc.WaitUntil(t, cliTimeout, "formica watch replays the run's tree", func() bool {
		return strings.Contains(watch.Stderr.String(), "c (depth 3) started")
	})

	forged := func(typ event.Type) []byte {
		data, err := event.Marshal(event.Event{Type: typ, RunID: run, Status: event.Succeeded, Output: "FORGED", Time: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, a := range []struct{ name, creds, inbox string }{
		{"worker credentials", c.creds("worker", "mallory"), "_FORMICA.worker.mallory"},
		{"client credentials", c.creds("client", "eve"), "_FORMICA.client.eve"},
	} {
		m := c.attacker(a.creds, a.inbox)
		for _, typ := range []event.Type{event.RunFinished, event.RunStarted} {
			m.refusedPublish(a.name+": forged "+string(typ), wire.SubjectEvents(run)+"."+string(typ), forged(typ))
		}
	}
	if watch.Exited() {
		t.Fatalf("formica watch ended before the run did: %s\nstdout: %s", watch.Status(), watch.Stdout.String())
	}

	c.call(http.StatusOK, http.MethodPost, "/v1/approvals/"+ask.ID, map[string]string{"decision": "allow"}, nil)
	if code := watch.Wait(t, runTimeout); code != 0 {
		t.Errorf("formica watch: exit %d, want 0", code)
	}
	if got := watch.Stdout.String(); got != "root finished\n" {
		t.Errorf("formica watch printed %q, want the run's own output", got)
	}
	if rec := c.waitFinal(run); rec.Status != event.Succeeded || rec.Output != "root finished" {
		t.Errorf("run: %s (%s), output %q", rec.Status, rec.Error, rec.Output)
	}
	events, _, _ := c.sse(run, 0, 0)
	finished := 0
	for _, e := range events {
		if e.e.Output == "FORGED" {
			t.Errorf("a forged event is in the run's stream: %+v", e.e)
		}
		if e.e.Type == event.RunFinished {
			finished++
		}
	}
	if finished != 1 {
		t.Errorf("%d run.finished events, want 1", finished)
	}
	if c.p.Exited() || w.Exited() {
		t.Errorf("coordinator %s, worker %s", c.p.Status(), w.Status())
	}
}
