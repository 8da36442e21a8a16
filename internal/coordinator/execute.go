package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/wire"
)

// errStopping cancels runs when their coordinator shuts down: queued runs
// then go back to the queue for another coordinator instead of ending.
var errStopping = errors.New("coordinator stopping")

// open checks a submission and registers its run with this coordinator.
func (c *Coordinator) open(sub *wire.RunSubmit) (*run, error) {
	if sub.RunID == "" {
		sub.RunID = c.cfg.NewID()
	}
	if err := ids.Check(sub.RunID); err != nil {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: "run " + err.Error()}
	}
	if strings.TrimSpace(sub.Task) == "" || sub.Agent.Name == "" {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: "a run needs a task and an agent name"}
	}
	if !wire.ValidApprover(sub.Approver) {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: "approver " + sub.Approver + " is not a subject in a client's inbox"}
	}
	if ref := scriptedRef(sub); ref != "" && !c.cfg.AllowScripted {
		return nil, &wire.Error{Code: wire.CodeForbidden, Message: "model " + ref + ": scripted models are for tests and are refused for submitted runs"}
	}
	if err := c.cfg.Ceilings.Check(sub.Ask()); err != nil {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}
	}
	ledger, err := limits.New(sub.Limits)
	if err != nil {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}
	}
	// The spawn ceiling bounds every run, budget or not: it is what keeps
	// the threads a coordinator records for one run finite.
	budget := sub.Budget
	budget.Spawns = c.cfg.Ceilings.Spawns(budget)
	rn := newRun(sub.RunID, ledger, limits.NewTree(budget, c.cfg.Now), sub.Approver)
	rn.timeout, rn.webhooks = sub.Timeout, sub.Webhooks
	if c.cfg.Store != nil {
		rn.journal = c.cfg.Store.RunJournal(sub.RunID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.accepting() {
		return nil, &wire.Error{Code: wire.CodeDraining, Message: "coordinator " + c.cfg.ID + " is stopping"}
	}
	if _, dup := c.runs[sub.RunID]; dup {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: "run " + sub.RunID + " is already running"}
	}
	c.runs[sub.RunID] = rn
	return rn, nil
}

// close forgets a run and cancels whatever is left of it.
func (c *Coordinator) close(rn *run) {
	c.mu.Lock()
	delete(c.runs, rn.id)
	if len(c.runs) == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
	rn.cancel(nil)
}

// execute runs a registered run's root thread to its end and returns the
// run's record. again says the run was executed before (delivered again
// after its coordinator died, or resumed): its journal is read first, so
// every thread reuses the work it did then.
func (c *Coordinator) execute(rn *run, sub wire.RunSubmit, again bool) record.Run {
	if again {
		c.loadRunJournal(rn)
	}
	root := thread.Thread{
		RunID: sub.RunID, ID: journal.RootID(sub.RunID), Path: sub.Agent.Name, Name: sub.Agent.Name, Task: sub.Task,
		Agent: sub.Agent, Agents: sub.Agents, Cwd: sub.Cwd,
		Permissions: policy.Permissions{sub.Agent.Harness.Permissions},
	}
	c.emit(rn, event.Event{Type: event.RunStarted, RunID: sub.RunID, ThreadID: root.ID, Name: root.Name})
	begun := time.Now()
	c.cfg.Metrics.RunStarted()
	if rn.timeout > 0 {
		deadline := time.AfterFunc(rn.timeout, func() { rn.cancel(ErrDeadline) })
		defer deadline.Stop()
	}
	t := rn.add(&threadRec{thread: root}, nil, rn.budget.Root())
	t.trace = rn.trace
	// The run's duration budget ends the whole run when it runs out.
	rn.watchDuration(t, rn.budget.Root(), c.cfg.Now(), rn.cancel)
	res, reused := rn.finishedInJournal(root.ID)
	reported := reused
	if !reused {
		res, reported = c.execThread(rn, t)
		res = endedAs(t, res)
	}
	end := rn.finish(t, res, c.cfg.Now())
	c.cfg.Metrics.ThreadEnded(string(res.Status), time.Since(begun), false)
	if reused {
		// Its own tokens settle on its lease (finish); its helpers' here.
		rn.budget.Root().Charge(limits.SpendOf(res.Usage).Less(limits.SpendOf(res.Own)), 0)
		// Its thread.finished went out when it finished, in an earlier
		// execution of the run.
		rn.rec.Reused(root.ID)
		c.cfg.Metrics.ThreadReused()
	} else {
		c.publish(end)
	}
	if !reported {
		c.journalEnd(rn, t, res)
	}
	// The root has ended, but a cancelled tree may still be winding down:
	// stop what is left and let it report, so the record is final.
	if context.Cause(rn.ctx) == nil {
		rn.cancel(errors.New("the run has ended"))
	}
	rn.settle(settleTimeout)
	c.syncJournal(rn)
	res = runOutcome(rn, res)
	if res.Status == event.Succeeded {
		res = c.cancelKept(rn, res)
	}
	if !errors.Is(context.Cause(rn.ctx), errFenced) {
		// A run taken over goes on elsewhere: its watchers see it end there.
		c.emit(rn, event.Event{Type: event.RunFinished, RunID: sub.RunID, ThreadID: root.ID, Name: root.Name,
			Status: res.Status, Reason: res.Error, Output: event.Clip(res.Output, maxEventOutput), Usage: res.Usage})
	}
	// Its events are sent before its record is final (publisher).
	if !c.events.flush(flushTimeout) {
		c.cfg.Logger.Warn("run's events not all sent in time", "run_id", sub.RunID)
	}
	rn.rec.SetResult(res.Status, res.Output, res.Error, res.Usage)
	// A run handed back to the queue on shutdown has not finished.
	c.cfg.Metrics.RunEnded(string(res.Status), time.Since(begun), !errors.Is(context.Cause(rn.ctx), errStopping))
	rec := rn.rec.Snapshot()
	rec.Coordinator = c.cfg.ID
	rec.Budget = rn.budget.Root().Use()
	rec.TraceID = tracing.TraceIDOf(rn.trace)
	return rec
}

// runOutcome is how a run ended given its root's result: past its deadline
// it failed with "deadline exceeded", with its budget spent with
// "budget exhausted (<kind>): <used>/<limit>" (keeping any output).
func runOutcome(rn *run, res thread.Result) thread.Result {
	if errors.Is(context.Cause(rn.ctx), ErrDeadline) {
		res.Status, res.Error = event.Failed, ErrDeadline.Error()
		return res
	}
	if spent := rn.budget.Root().Spent(); spent != nil && res.Status != event.Cancelled {
		res.Status, res.Error = event.Failed, spent.Detail()
	}
	return res
}

// cancelKept is res, or cancelled if a cancel of the queued run was
// recorded (and answered 202) that had not reached this coordinator when
// the root finished: run.finished then says what the record will.
func (c *Coordinator) cancelKept(rn *run, res thread.Result) thread.Result {
	if c.cfg.Store == nil || rn.lease.Load() == nil {
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	rec, _, err := c.cfg.Store.GetRecord(ctx, rn.id)
	if err == nil && rec.CancelRequested != "" {
		res.Status, res.Error = event.Cancelled, rec.CancelRequested
	}
	return res
}

// maxEventOutput bounds the output an event carries; the run record has all of it.
const maxEventOutput = 64 << 10

// scriptedRef finds a scripted:<file> model among what a submission may run:
// the file is a path on the workers' disks, which no submitter may name.
func scriptedRef(sub *wire.RunSubmit) string {
	for _, a := range slices.AppendSeq([]spec.Agent{sub.Agent}, maps.Values(sub.Agents)) {
		for _, ref := range []string{a.Model, a.Helper.Model} {
			if r, err := model.ParseRef(ref); err == nil && r.Provider == "scripted" {
				return ref
			}
		}
	}
	return ""
}
