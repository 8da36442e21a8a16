package coordinator

import (
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

// executeRun runs a run of budget b and deadline timeout on the rig, its
// root placed on worker w1 in a call that would end it only after 30s.
// answer says whether w1 answers a cancel at once with the cancelled
// result a worker sends (its thread's context cancelled with the cancel's
// reason). It returns the run's record, how long the run took on the
// bubble's clock and the reasons of the cancels sent to w1.
func executeRun(t *testing.T, b limits.Budget, timeout time.Duration, answer bool) (record.Run, time.Duration, []string) {
	g := newExecRig(t, Config{})
	ledger, err := limits.New(limits.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rn := newRun("r2", ledger, limits.NewTree(b, time.Now), "")
	rn.timeout = timeout
	g.c.runs[rn.id] = rn
	g.join("w1")
	cancels := make(chan string, 8)
	g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
		r.Reply(accepted("w1"))
		select {
		case reason := <-cancels:
			cancels <- reason // for the test to read
			if answer {
				r.Reply(execResult(req, "w1", thread.Result{Status: event.Cancelled, Error: reason}))
			}
		case <-time.After(30 * time.Second):
			r.Reply(execResult(req, "w1", thread.Result{Status: event.Succeeded, Output: "too late"}))
		}
	})
	g.cancels("w1", func(cn wire.Cancel) { cancels <- cn.Reason })
	go keepBeating(t.Context(), g, "w1")
	sub := wire.RunSubmit{RunID: rn.id, Task: "t", Agent: spec.Agent{Name: "root", Model: "sim"}}
	begun := time.Now()
	rec := g.c.execute(rn, sub, false)
	took := time.Since(begun)
	g.c.close(rn)
	synctest.Wait()
	var reasons []string
	for len(cancels) > 0 {
		reasons = append(reasons, <-cancels)
	}
	return rec, took, reasons
}

// A run's duration budget ends it when it runs out, while its root is in
// a call that would go on far longer: its worker is told at once, and the
// run ends failed with the budget's detail at the budget's end, with no
// delay of its own (the worker answers the cancel at once here; on real
// workers what the cut costs is their answer: internal/embedded's
// TestDurationBudgetCutsCalls).
func TestDurationBudgetCutsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, took, reasons := executeRun(t, limits.Budget{Duration: 3 * time.Second}, 0, true)
		if rec.Status != event.Failed || rec.Error != "budget exhausted (duration): 3s/3s" {
			t.Fatalf("run: %s %q", rec.Status, rec.Error)
		}
		if took != 3*time.Second {
			t.Errorf("the run took %v, want its budget's 3s", took)
		}
		if len(reasons) != 1 || reasons[0] != "budget exhausted (duration)" {
			t.Errorf("cancels sent to the worker: %q", reasons)
		}
		if len(rec.Threads) != 1 || rec.Threads[0].Status != event.Failed || rec.Threads[0].Error != "budget exhausted (duration)" {
			t.Errorf("threads %+v, want the root failed with the budget's reason", rec.Threads)
		}
		if a := rec.Budget[limits.KindDuration]; a != (limits.Amount{Used: 3000, Limit: 3000}) {
			t.Errorf("record budget %+v", rec.Budget)
		}
	})
}

// A worker that does not answer the cut costs the run one loss window
// more, as any cancel of a silent worker's thread does: the bound of the
// slack the docs give.
func TestDurationBudgetCutUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, took, _ := executeRun(t, limits.Budget{Duration: 3 * time.Second}, 0, false)
		if rec.Status != event.Failed || rec.Error != "budget exhausted (duration): 3s/3s" {
			t.Fatalf("run: %s %q", rec.Status, rec.Error)
		}
		if want := 3*time.Second + MissedHeartbeats*testInterval; took != want {
			t.Errorf("the run took %v, want its budget and a loss window, %v", took, want)
		}
	})
}

// A run's deadline ends it the same way, failed with "deadline exceeded".
func TestDeadlineEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, took, reasons := executeRun(t, limits.Budget{}, 3*time.Second, true)
		if rec.Status != event.Failed || rec.Error != "deadline exceeded" {
			t.Fatalf("run: %s %q", rec.Status, rec.Error)
		}
		if took != 3*time.Second {
			t.Errorf("the run took %v, want its deadline's 3s", took)
		}
		if len(reasons) != 1 || reasons[0] != "deadline exceeded" {
			t.Errorf("cancels sent to the worker: %q", reasons)
		}
	})
}

// A root that ends before the run's duration budget runs out is not cut
// afterwards: the watch stops with it.
func TestDurationBudgetNotSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		ledger, err := limits.New(limits.Config{})
		if err != nil {
			t.Fatal(err)
		}
		rn := newRun("r2", ledger, limits.NewTree(limits.Budget{Duration: 3 * time.Second}, time.Now), "")
		g.c.runs[rn.id] = rn
		g.join("w1")
		g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
			time.Sleep(2 * time.Second)
			r.Reply(execResult(req, "w1", thread.Result{Status: event.Succeeded, Output: "done"}))
		})
		go keepBeating(t.Context(), g, "w1")
		rec := g.c.execute(rn, wire.RunSubmit{RunID: rn.id, Task: "t", Agent: spec.Agent{Name: "root", Model: "sim"}}, false)
		g.c.close(rn)
		time.Sleep(2 * time.Second) // past the budget's end
		if rec.Status != event.Succeeded || rec.Output != "done" {
			t.Fatalf("run: %s %q", rec.Status, rec.Error)
		}
		if spent := rn.budget.Root().Spent(); spent != nil {
			t.Errorf("budget spent after the run: %v", spent)
		}
	})
}
