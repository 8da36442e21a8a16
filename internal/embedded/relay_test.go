package embedded

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/wire"
)

// TestWorkerEventsAreStampedByTheCoordinator: a worker that holds a real
// placement (the run's root, on the only worker there is) reports events
// naming another run and thread, and kinds that are not a worker's to
// report (run.finished, thread.finished). The coordinator publishes the
// thread events as the placed thread's own, drops the rest, and publishes
// one thread.started and one thread.finished of its own; nothing appears on
// the other run's subject.
func TestWorkerEventsAreStampedByTheCoordinator(t *testing.T) {
	s, cl := startStack(t, 0, 4)
	nc := mustConn(t, s, "rogue-worker")
	t.Cleanup(nc.Close)

	var mu sync.Mutex
	var elsewhere []string
	other, err := nc.Subscribe(wire.SubjectEvents("other-run")+".>", func(m *nats.Msg) {
		mu.Lock()
		elsewhere = append(elsewhere, m.Subject)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unsubscribe()

	forged := []event.Event{
		{Type: event.ToolResult, Time: time.Now(), RunID: "other-run", ThreadID: "someone-else", ParentID: "x", Depth: 3,
			Name: "boss", Tool: "bash", CallID: "c1", Output: "reported"},
		{Type: event.RunFinished, RunID: "other-run", Status: event.Succeeded, Output: "HIJACKED"},
		{Type: event.ThreadFinished, RunID: "other-run", ThreadID: "someone-else", Status: event.Failed, Reason: "HIJACKED"},
		{Type: event.ThreadStarted, Worker: "HIJACKED"},
	}
	exec, err := nc.Subscribe(wire.SubjectExec("rogue"), func(m *nats.Msg) {
		var req wire.ExecRequest
		if err := wire.DecodeAs(m.Data, wire.TypeExecRequest, &req); err != nil {
			t.Errorf("exec request: %v", err)
			return
		}
		respond := func(typ wire.Type, body any) {
			r := nats.NewMsg(m.Reply)
			r.Header.Set(wire.HeaderType, string(typ))
			r.Data = wire.MustEncode(typ, body)
			if err := nc.PublishMsg(r); err != nil {
				t.Errorf("reply %s: %v", typ, err)
			}
		}
		respond(wire.TypeExecAccepted, wire.ExecAccepted{Worker: "rogue"})
		respond(wire.TypeProgress, wire.Progress{ThreadID: req.Thread.ID, Token: req.Token, Events: forged})
		respond(wire.TypeExecResult, wire.ExecResult{ThreadID: req.Thread.ID, Worker: "rogue", Token: req.Token,
			Result: thread.Result{Status: event.Succeeded, Output: "rogue output"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Unsubscribe()
	hb := wire.MustEncode(wire.TypeWorkerHeartbeat, wire.WorkerHeartbeat{ID: "rogue", Slots: 4, Interval: time.Minute})
	if err := nc.Publish(wire.SubjectWorkerHeartbeat("rogue"), hb); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	for deadline := time.Now().Add(runTimeout); len(s.Coordinator.Workers()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rogue worker never registered")
		}
	}

	var got []event.Event
	sink := event.SinkFunc(func(e event.Event) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	})
	sub := simSubmit(t, "Plan:\n- a", 0, limits.Config{})
	rec := runAsync(t, context.Background(), cl, sub, sink)()
	if rec.Status != event.Succeeded || rec.Output != "rogue output" || len(rec.Threads) != 1 {
		t.Fatalf("run: %s (%s), output %q, %d threads", rec.Status, rec.Error, rec.Output, len(rec.Threads))
	}
	root := rec.Threads[0]
	nc.Flush()

	mu.Lock()
	defer mu.Unlock()
	count := map[event.Type]int{}
	for _, e := range got {
		count[e.Type]++
		if e.Output == "HIJACKED" || e.Reason == "HIJACKED" || e.Worker == "HIJACKED" {
			t.Errorf("a forged %s reached the run's watchers: %+v", e.Type, e)
		}
		if e.Type != event.ToolResult {
			continue
		}
		if e.RunID != sub.RunID || e.ThreadID != root.ID || e.ParentID != "" || e.Depth != 0 || e.Name != root.Name || e.Output != "reported" {
			t.Errorf("tool.result published as %+v; want it stamped as the root %s (%s) of run %s", e, root.ID, root.Name, sub.RunID)
		}
	}
	for typ, want := range map[event.Type]int{event.ToolResult: 1, event.ThreadStarted: 1, event.ThreadFinished: 1, event.RunFinished: 1} {
		if count[typ] != want {
			t.Errorf("%d %s events, want %d (saw %v)", count[typ], typ, want, count)
		}
	}
	if len(elsewhere) > 0 {
		t.Errorf("events published for a run the worker does not host: %s", strings.Join(elsewhere, ", "))
	}
}

// TestEventsLeaveInOrder: the coordinator publishes events through one
// ordered queue, off the paths that relay them. A thread's relayed events
// (its model calls) still come before its thread.finished, each helper's
// thread.finished before its parent's tool.result for the call that spawned
// it (relayed later, from the parent's worker), and run.finished last, with
// every event of the run delivered by the time the run's record is.
func TestEventsLeaveInOrder(t *testing.T) {
	_, cl := startStack(t, 2, 8)
	var mu sync.Mutex
	var got []event.Event
	sink := event.SinkFunc(func(e event.Event) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	})
	for round := range 3 {
		got = got[:0]
		sub := simSubmit(t, "Plan:\n- a\n- b\n- c\n- d\n- e\n- f", 0, limits.Config{})
		rec := runAsync(t, context.Background(), cl, sub, sink)()
		if rec.Status != event.Succeeded || len(rec.Threads) != 7 {
			t.Fatalf("round %d: run %s (%s), %d threads", round, rec.Status, rec.Error, len(rec.Threads))
		}
		mu.Lock()
		evs := append([]event.Event(nil), got...)
		mu.Unlock()
		if n := len(evs); n == 0 || evs[n-1].Type != event.RunFinished {
			t.Fatalf("round %d: %d events when the record came, the last not run.finished: %v", round, n, types(evs))
		}
		finished := map[string]int{} // thread -> index of its thread.finished
		helperOf := map[string]string{}
		for i, e := range evs {
			switch e.Type {
			case event.ThreadFinished:
				finished[e.ThreadID] = i
			case event.ThreadSpawned:
				helperOf[e.CallID] = e.ThreadID
			}
		}
		models := 0
		for i, e := range evs {
			switch e.Type {
			case event.ModelCall, event.ToolCall, event.ToolResult:
				end, ok := finished[e.ThreadID]
				if !ok || end < i {
					t.Errorf("round %d: %s of thread %s (%s) at %d, after its thread.finished (at %d, seen %v)", round, e.Type, e.ThreadID, e.Name, i, end, ok)
				}
				if e.Type == event.ModelCall && e.Depth == 1 {
					models++
				}
			}
			if e.Type == event.ToolResult && e.Depth == 0 {
				h := helperOf[e.CallID]
				if end, ok := finished[h]; !ok || end > i {
					t.Errorf("round %d: the root's tool.result for call %s at %d, before its helper %q's thread.finished (at %d, seen %v)", round, e.CallID, i, h, end, ok)
				}
			}
		}
		if models != 6 {
			t.Errorf("round %d: %d helpers' model.call events, want 6: %v", round, models, types(evs))
		}
	}
}

func types(evs []event.Event) []event.Type {
	out := make([]event.Type, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
