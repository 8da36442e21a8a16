package coordinator

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// A run whose cancel was answered while it ran does not end succeeded,
// even when its root finished before the cancel reached it; a run that
// failed keeps its own reason.
func TestFinalHonoursAnsweredCancel(t *testing.T) {
	c := &Coordinator{cfg: Config{Now: func() time.Time { return time.Unix(100, 0) }}}
	for _, tc := range []struct {
		ended      event.Status
		asked      string
		want       event.Status
		wantReason string
	}{
		{event.Succeeded, CancelledByUser, event.Cancelled, CancelledByUser},
		{event.Succeeded, "", event.Succeeded, ""},
		{event.Failed, CancelledByUser, event.Failed, "boom"},
	} {
		stored := record.Run{RunID: "r1", Status: event.Running, CancelRequested: tc.asked, Task: "t"}
		ended := record.Run{RunID: "r1", Status: tc.ended, Output: "out"}
		if tc.ended == event.Failed {
			ended.Error = "boom"
		}
		c.final(ended)(&stored)
		if stored.Status != tc.want || stored.Error != tc.wantReason || stored.Task != "t" {
			t.Errorf("ended %s, cancel asked %q: stored %s %q (task %q), want %s %q", tc.ended, tc.asked, stored.Status, stored.Error, stored.Task, tc.want, tc.wantReason)
		}
	}
}

// A run cancelled at a request ends cancelled even when its root, told of
// the cancel too late, reports success (a denied approval let it answer
// once more): run.finished says so, as the record does.
func TestCancelledRunEndsCancelledWhateverItsRoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		finished := make(chan event.Event, 1)
		g.c.events = newPublisher(maxQueuedEvents, func(e *event.Event) {
			if e.Type == event.RunFinished {
				finished <- *e
			}
		}, nil)
		ledger, err := limits.New(limits.Config{})
		if err != nil {
			t.Fatal(err)
		}
		rn := newRun("r2", ledger, limits.NewTree(limits.Budget{}, time.Now), "")
		g.c.runs[rn.id] = rn
		g.join("w1")
		g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(accepted("w1"))
			time.Sleep(2 * time.Second) // its last model call, under way when the cancel comes
			r.Reply(execResult(req, "w1", thread.Result{Status: event.Succeeded, Output: "done anyway"}))
		})
		g.cancels("w1", func(wire.Cancel) {})
		go keepBeating(t.Context(), g, "w1")
		time.AfterFunc(time.Second, func() {
			answer(wire.TypeCancel, g.c.handleRunCancel)(t.Context(), wire.Message(wire.TypeCancel, wire.Cancel{RunID: rn.id, Reason: CancelledByUser}), make(replies, 1))
		})
		rec := g.c.execute(rn, wire.RunSubmit{RunID: rn.id, Task: "t", Agent: spec.Agent{Name: "root", Model: "sim"}}, false)
		g.c.close(rn)
		if rec.Status != event.Cancelled || rec.Error != CancelledByUser || rec.Output != "done anyway" {
			t.Errorf("record %s %q, output %q; want cancelled %q, keeping the output", rec.Status, rec.Error, rec.Output, CancelledByUser)
		}
		if e := <-finished; e.Status != event.Cancelled || e.Reason != CancelledByUser {
			t.Errorf("run.finished %s %q, want cancelled %q", e.Status, e.Reason, CancelledByUser)
		}
	})
}

// endedAs: a thread cancelled at a request ends cancelled whatever its
// worker answered, keeping its output; one cut by a spent budget failed
// with the budget's reason; any other result is itself.
func TestEndedAs(t *testing.T) {
	exhausted := &limits.Exhausted{Kind: limits.KindDuration}
	for _, tc := range []struct {
		cause      error
		answered   event.Status
		want       event.Status
		wantReason string
	}{
		{&cancelAsked{CancelledByUser}, event.Succeeded, event.Cancelled, CancelledByUser},
		{&cancelAsked{CancelledByUser}, event.Failed, event.Cancelled, CancelledByUser},
		{&cancelAsked{CancelledByUser}, event.Cancelled, event.Cancelled, "worker's"},
		{exhausted, event.Cancelled, event.Failed, exhausted.Error()},
		{exhausted, event.Succeeded, event.Succeeded, "worker's"},
		{nil, event.Failed, event.Failed, "worker's"},
	} {
		ctx, cancel := context.WithCancelCause(t.Context())
		if tc.cause != nil {
			cancel(tc.cause)
		}
		got := endedAs(&threadRec{ctx: ctx}, thread.Result{Status: tc.answered, Error: "worker's", Output: "out"})
		cancel(nil)
		if got.Status != tc.want || got.Error != tc.wantReason || got.Output != "out" {
			t.Errorf("cause %v, answered %s: %s %q (output %q), want %s %q", tc.cause, tc.answered, got.Status, got.Error, got.Output, tc.want, tc.wantReason)
		}
	}
}
