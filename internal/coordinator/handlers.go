package coordinator

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// answer serves requests of type typ: each decoded into a T (one that does
// not decode is answered with its error) and answered with what h returns,
// its message or its error. A zero message is no answer: the request is
// another coordinator's to answer.
func answer[T any](typ wire.Type, h func(m wire.Msg, req *T) (wire.Msg, error)) transport.Handler {
	return func(_ context.Context, m wire.Msg, r transport.Replier) {
		var req T
		reply, err := wire.Msg{}, wire.DecodeAs(m.Data, typ, &req)
		if err == nil {
			reply, err = h(m, &req)
		}
		switch {
		case err != nil:
			r.Reply(wire.ErrorReply(err))
		case reply.Type != "":
			r.Reply(reply)
		}
	}
}

// okReply answers a request done. Messages are never changed once built,
// so one serves all.
var okReply = wire.Message(wire.TypeOK, struct{}{})

// handleSubmit runs a submitted run to its end: accepted at once, progress
// while it runs, the run's record as the final reply.
func (c *Coordinator) handleSubmit(_ context.Context, m wire.Msg, r transport.Replier) {
	var sub wire.RunSubmit
	if err := wire.DecodeAs(m.Data, wire.TypeRunSubmit, &sub); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	// Where its tools act, by the rule of queued runs: a submitter names a
	// directory inside this coordinator's --cwd, or none.
	if err := c.placeCwd(&sub); err != nil {
		r.Reply(wire.ErrorReply(&wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}))
		return
	}
	if err := c.checkSubmittedWebhooks(sub); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	rn, err := c.open(&sub)
	if err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	defer c.close(rn)
	rn.trace = tracing.Carry(m.Header)
	c.cfg.Metrics.RunSubmitted()
	r.Reply(wire.Message(wire.TypeRunAccepted, wire.RunAccepted{RunID: sub.RunID, Coordinator: c.cfg.ID}))
	ping := c.alive.add(r, "")
	stored := c.recordDirect(sub)
	begun := time.Now()
	rec := c.execute(rn, sub, false)
	c.logFinished(rec, 1, time.Since(begun))
	if stored {
		c.finishDirect(sub, rec)
	}
	// Progress goes on while the reply is sent: a record over the NATS max
	// payload is uploaded first, which may outlast the submitter's patience.
	r.Reply(wire.Message(wire.TypeRunResult, wire.RunResult{Record: rec}))
	c.alive.remove(ping)
}

// recordDirect stores the record of a run submitted straight to this
// coordinator (`formica run --nats`), as it does for queued runs, so get,
// runs, watch and the API see it: running, one attempt, never requeued. It
// reports whether the record was created.
func (c *Coordinator) recordDirect(sub wire.RunSubmit) bool {
	if c.cfg.Store == nil {
		return false
	}
	rec := store.SubmittedRecord(sub, c.cfg.Now())
	rec.Status, rec.Attempts, rec.StartedAt, rec.Coordinator = event.Running, 1, rec.CreatedAt, c.cfg.ID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.cfg.Store.CreateRecord(ctx, rec); err != nil {
		c.cfg.Logger.Warn("record run", "run", sub.RunID, "err", err)
		return false
	}
	return true
}

// finishDirect stores a direct run's final record, and keeps its webhook
// calls once it is stored.
func (c *Coordinator) finishDirect(sub wire.RunSubmit, rec record.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.finishRecord(ctx, rec.RunID, 0, c.final(rec)) != nil {
		return
	}
	if err := c.keepWebhooks(ctx, sub); err != nil {
		c.cfg.Logger.Warn("keep the run's webhook calls", "run_id", rec.RunID, "err", err)
	}
}

// handleBudget settles what a thread spent since its last grant and
// answers with its next one.
func (c *Coordinator) handleBudget(m wire.Msg, req *wire.BudgetRenew) (wire.Msg, error) {
	_, t, err := c.placedThread(req.RunID, req.ThreadID, m.Subject, req.Token)
	if err != nil {
		return wire.Msg{}, err
	}
	return wire.Message(wire.TypeBudgetGrant, t.lease.Renew(limits.Spend{In: req.InputTokens, Out: req.OutputTokens, Micros: req.CostMicros}, req.NeedMicros)), nil
}

// handlePlacementCheck answers a worker that asks, before a tool call,
// whether its placement of a thread is still current: ok, which keeps the
// placement from being given up for a loss window, or fenced.
func (c *Coordinator) handlePlacementCheck(m wire.Msg, req *wire.PlacementCheck) (wire.Msg, error) {
	rn, err := c.ownedRun(req.RunID)
	if err == nil {
		err = rn.vouch(req.ThreadID, wire.SenderOf(m.Subject), req.Token, time.Now())
	}
	if err != nil {
		c.refuse(m.Subject, err)
		return wire.Msg{}, err
	}
	return okReply, nil
}

// handleThreadCancel cancels a helper (and its subtree) at the request of
// its parent's current placement.
func (c *Coordinator) handleThreadCancel(m wire.Msg, cn *wire.ThreadCancel) (wire.Msg, error) {
	rn, parent, err := c.placedThread(cn.RunID, cn.ParentID, m.Subject, cn.Token)
	if err != nil {
		return wire.Msg{}, err
	}
	if t := rn.thread(cn.ThreadID); t != nil && t.thread.ParentID == cn.ParentID {
		// A parent cancelled here (its run's cancel, a budget's cut) may
		// ask before that cancel has reached this helper: the helper ends
		// for the same cause, not the words the parent's worker had for it.
		cause := context.Cause(parent.ctx)
		if cause == nil {
			cause = errors.New(cn.Reason)
		}
		t.cancel(cause)
	}
	return okReply, nil
}

// placedThread finds thread id of run runID as placed, under token, on the
// worker that sent a message on subject, or says (and logs) why the
// message does not count.
func (c *Coordinator) placedThread(runID, id, subject, token string) (*run, *threadRec, error) {
	rn, err := c.ownedRun(runID)
	var t *threadRec
	if err == nil {
		t, err = rn.placedOn(id, wire.SenderOf(subject), token)
	}
	if err != nil {
		c.refuse(subject, err)
	}
	return rn, t, err
}

// ownedRun finds run runID among this coordinator's; a message about
// another's is fenced.
func (c *Coordinator) ownedRun(runID string) (*run, error) {
	if rn := c.run(runID); rn != nil {
		return rn, nil
	}
	return nil, &wire.Error{Code: wire.CodeFenced, Message: "run " + runID + " is not owned by coordinator " + c.cfg.ID}
}

// handleRunCancel cancels a whole run if this coordinator owns it, or,
// when the message names threads, only those threads and their subtrees:
// each cancelled helper's parent gets "Helper <name> failed: ..." and goes
// on. An unknown thread is answered not_found.
func (c *Coordinator) handleRunCancel(_ wire.Msg, cn *wire.Cancel) (wire.Msg, error) {
	rn := c.run(cn.RunID)
	if rn == nil {
		return wire.Msg{}, nil // another coordinator's run: its owner answers
	}
	reason := cmp.Or(cn.Reason, "run cancelled")
	if len(cn.ThreadIDs) == 0 {
		rn.cancel(&cancelAsked{reason})
		return okReply, nil
	}
	var found []*threadRec
	for _, id := range cn.ThreadIDs {
		t := rn.thread(id)
		if t == nil {
			return wire.Msg{}, &wire.Error{Code: wire.CodeNotFound, Message: "thread " + id + " is not in run " + cn.RunID}
		}
		found = append(found, t)
	}
	for _, t := range found {
		t.cancel(&cancelAsked{reason})
	}
	return okReply, nil
}

// cancelAsked is the cause of a run or a thread cancelled at someone's
// request: it ends cancelled whatever its worker answers (endedAs).
type cancelAsked struct{ reason string }

func (e *cancelAsked) Error() string { return e.reason }

func (c *Coordinator) run(id string) *run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// emit records an event in the run's record and publishes it; its time is
// now when it has none.
func (c *Coordinator) emit(rn *run, e event.Event) {
	if e.Time.IsZero() {
		e.Time = c.cfg.Now()
	}
	rn.rec.Emit(e)
	rn.active.touch()
	c.publish(e)
}

// journalEnd journals the end of a thread no worker reported (lost, never
// placed, cancelled before it ran); a worker that ran it to its end has
// journaled that itself.
func (c *Coordinator) journalEnd(rn *run, t *threadRec, res thread.Result) {
	c.coordJournal(rn, t.thread.ID, "", journal.Entry{Kind: journal.KindEnd, Status: res.Status, Output: res.Output,
		Error: res.Error, Usage: res.Usage, Own: res.Own})
}
