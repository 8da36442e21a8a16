package durable_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/formica-run/formica/internal/event"
)

// TestEventStreamResumes: a client of GET /v1/runs/{id}/events that hangs
// up every few events and comes back with Last-Event-ID gets, in all, the
// same events as a full replay of the finished run: none missed, none
// repeated, in order.
func TestEventStreamResumes(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 8)
	id := c.submit(map[string]any{"task": "Plan:\n- a\n  - a1\n  - a2\n- b\n  - b1\n- c", "agent": simAgent(150)})

	var (
		got     []sseEvent
		last    uint64
		resumes int
	)
	for chunk := 3; ; chunk++ {
		events, code, ended := c.sse(id, last, chunk)
		if code != http.StatusOK {
			t.Fatalf("resume %d after event %d: status %d", resumes, last, code)
		}
		got = append(got, events...)
		if len(events) > 0 {
			last = events[len(events)-1].id
		}
		if ended {
			break
		}
		resumes++
		if resumes > 100 {
			t.Fatalf("the stream did not end after %d resumes", resumes)
		}
	}
	rec := c.waitFinal(id)
	full, code, ended := c.sse(id, 0, 0)
	if code != http.StatusOK || !ended {
		t.Fatalf("full replay: status %d, ended %v", code, ended)
	}
	if len(got) != len(full) {
		t.Errorf("resumed client got %d events, the full replay has %d", len(got), len(full))
	}
	for i := range min(len(got), len(full)) {
		if got[i].id != full[i].id || got[i].data != full[i].data {
			t.Errorf("event %d: resumed client got id %d %s; replay has id %d %s", i, got[i].id, got[i].data, full[i].id, full[i].data)
		}
	}
	for i := 1; i < len(full); i++ {
		if full[i].id <= full[i-1].id {
			t.Errorf("event ids not increasing: %d after %d", full[i].id, full[i-1].id)
		}
	}
	if len(full) == 0 || full[0].e.Type != event.RunStarted || full[len(full)-1].e.Type != event.RunFinished {
		t.Errorf("replay does not run from run.started to run.finished: %d events", len(full))
	}
	if n := count(full, event.ThreadFinished); n != 7 {
		t.Errorf("%d thread.finished events, want 7 (root and 6 helpers)", n)
	}
	if rec.Status != event.Succeeded {
		t.Errorf("run %s: %s (%s)", id, rec.Status, rec.Error)
	}
	if resumes < 3 {
		t.Errorf("the client resumed only %d times; the run should outlast a few chunks", resumes)
	}
	// Resuming after the last event of a finished run: nothing more, 204.
	if _, code, _ := c.sse(id, last, 0); code != http.StatusNoContent {
		t.Errorf("resume after the last event of a finished run: status %d, want 204", code)
	}
	// ?after= resumes too when there is no Last-Event-ID.
	mid := full[len(full)/2]
	code, data, err := c.do(http.MethodGet, "/v1/runs/"+id+"/events?after="+strconv.FormatUint(mid.id, 10), nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("events?after=%d: %d %v", mid.id, code, err)
	}
	if want := "id: " + strconv.FormatUint(full[len(full)/2+1].id, 10) + "\n"; len(data) < len(want) || string(data[:len(want)]) != want {
		t.Errorf("events?after=%d starts %q, want %q", mid.id, data[:min(len(data), 40)], want)
	}
	t.Logf("%d events over %d connections", len(full), resumes+1)
}
