package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

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
		c.finishDirect(rec)
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

// finishDirect stores a direct run's final record.
func (c *Coordinator) finishDirect(rec record.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.finishRecord(ctx, rec.RunID, c.final(rec))
}

// handleSpawn admits and places one helper; the parent is answered when
// the helper ends, which the coordinator follows as data (startThread), so
// the handler returns once the helper's request is sent. The parent hears
// from this coordinator from the start: admission may take a while under a
// storm of spawns. Its keep-alive names the helper once admitted.
func (c *Coordinator) handleSpawn(_ context.Context, m wire.Msg, r transport.Replier) {
	ping := c.alive.add(r, "")
	sp := c.admitSpawn(m, r, ping)
	if sp == nil {
		c.alive.remove(ping)
		return
	}
	if w := sp.rn.parkParent(sp.parent); w != "" {
		c.registry.park(w)
	}
	c.startThread(sp.rn, sp.t, sp.ended)
}

// progressPing is the keep-alive of a request that names no thread: its
// requester needs no more than to know this coordinator is alive. Messages
// are never changed once built, so one serves all.
var progressPing = wire.Message(wire.TypeProgress, wire.Progress{})

// admittedSpawn is a helper admitted by admitSpawn, until its parent is
// answered.
type admittedSpawn struct {
	c      *Coordinator
	rn     *run
	parent *threadRec
	t      *threadRec
	slot   *limits.Slot
	ping   *alivePing
	reply  transport.Replier // the parent's
}

// admitSpawn decodes and admits a spawn, registers the helper and tells the
// parent its id; nil means it answered the parent already (refused or bad).
// The helper is derived from the parent thread held here; the request only
// names the parent (proved by its placement's token) and the tool's arguments.
func (c *Coordinator) admitSpawn(m wire.Msg, r transport.Replier, ping *alivePing) *admittedSpawn {
	in := time.Now()
	var req wire.SpawnRequest
	if err := wire.DecodeAs(m.Data, wire.TypeSpawnRequest, &req); err != nil {
		r.Reply(wire.ErrorReply(err))
		return nil
	}
	rn, parent, err := c.placedThread(req.RunID, req.ParentID, wire.SenderOf(m.Subject), req.Token)
	if err != nil {
		c.refuse(m.Subject, err)
		r.Reply(wire.ErrorReply(err))
		return nil
	}
	c.relay(parent, req.Events, m.Subject)
	id := journal.HelperID(req.RunID, req.ParentID, req.CallID, c.cfg.NewID)
	err = tools.CheckHelperArgs(req.Name, req.Task)
	t := &threadRec{}
	th := &t.thread
	if err == nil {
		err = thread.SetHelper(th, &parent.thread, req.Handoffs, id, req.Name, req.Task)
	}
	if err != nil {
		r.Reply(wire.ErrorReply(&wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}))
		return nil
	}
	// The parent makes no model call while it waits: its budget share goes
	// to its helpers (its worker dropped its grant before asking).
	parent.lease.Release(req.ParentSpent.InputTokens, req.ParentSpent.OutputTokens)
	rn.admitting.Lock()
	defer rn.admitting.Unlock()
	if known := rn.thread(th.ID); known != nil {
		// The parent was placed again and asks for a helper it already has:
		// that helper goes on, and its result goes to the parent now.
		go c.attachSpawn(rn, parent, known, r)
		return nil
	}
	if res, ok := rn.finishedInJournal(th.ID); ok {
		c.reuseSpawn(rn, parent, th, req.CallID, res, r)
		return nil
	}
	slot, err := rn.ledger.Admit(th.Depth)
	if err != nil {
		var refusal *limits.Refusal
		errors.As(err, &refusal)
		c.refuseSpawn(rn, th, req.CallID, refusal.Reason, "", r)
		return nil
	}
	node := parent.lease.Node()
	if err := node.Spawn(); err != nil {
		slot.Release()
		c.refuseSpawn(rn, th, req.CallID, limits.ReasonBudget, err.(*limits.Exhausted).Kind, r)
		return nil
	}
	// The helper's own budget comes from the template it was made from, as
	// derived here from the parent, never from the request.
	rn.add(t, parent, node.Child(th.Agent.Helper.Budget))
	t.spec = rn.helperSpec(parent, th, req.Handoffs)
	t.admitted = in
	t.trace = tracing.Carry(m.Header)
	c.cfg.Metrics.SpawnAdmitted()
	c.spawned(rn, &t.thread, req.CallID)
	// From now on the parent's keep-alive names its helper, so a parent
	// whose helper outlasts a heartbeat journals the spawn before its end;
	// nothing is sent now: a helper that ends sooner is told of with its
	// result.
	c.alive.name(ping, th.ID)
	return &admittedSpawn{c: c, rn: rn, parent: parent, t: t, slot: slot, ping: ping, reply: r}
}

// spawned tells the run's watchers of a helper admitted for the parent's
// call callKey.
func (c *Coordinator) spawned(rn *run, th *thread.Thread, callKey string) {
	e := threadEvent(event.ThreadSpawned, th)
	e.CallID = eventCallID(callKey) // the parent's call: siblings show in call order
	c.emit(rn, e)
}

// refuseSpawn answers a spawn the limits refused (budget names the budget
// that was spent, for limits.ReasonBudget) and says so to the run's
// watchers.
func (c *Coordinator) refuseSpawn(rn *run, th *thread.Thread, callKey string, reason limits.Reason, budget limits.Kind, r transport.Replier) {
	e := threadEvent(event.ThreadRefused, th)
	e.ThreadID, e.Reason, e.CallID = "", string(reason), eventCallID(callKey)
	c.emit(rn, e)
	c.cfg.Metrics.SpawnRefused(string(reason))
	r.Reply(wire.Message(wire.TypeSpawnResult, wire.SpawnResult{Refusal: reason, Budget: budget}))
}

// eventCallID is the model's id of the call a spawn request names, as the
// parent's tool.call event has it (the request adds the turn).
func eventCallID(callKey string) string {
	_, id := journal.ParseCallKey(callKey)
	return id
}

// attachSpawn answers a parent's spawn with the end of helper t, which an
// earlier placement of the parent started.
func (c *Coordinator) attachSpawn(rn *run, parent, t *threadRec, r transport.Replier) {
	r.Reply(wire.Message(wire.TypeProgress, wire.Progress{ThreadID: t.thread.ID}))
	ping := c.alive.add(r, t.thread.ID)
	defer c.alive.remove(ping)
	if w := rn.parkParent(parent); w != "" {
		c.registry.park(w)
	}
	select {
	case <-t.ended:
	case <-parent.ctx.Done():
	}
	if w := rn.unparkParent(parent); w != "" {
		c.registry.unpark(w)
	}
	rn.mu.Lock()
	res, done, worker := t.result, t.done, t.worker
	rn.mu.Unlock()
	if !done {
		res = thread.Cancelled(parent.ctx)
	}
	r.Reply(wire.Message(wire.TypeSpawnResult, wire.SpawnResult{ThreadID: t.thread.ID, Worker: worker, Result: res}))
}

// reuseSpawn answers a spawn with the journaled output of a helper that
// finished in an earlier execution of the run: it is not placed, takes no
// slot, and its tokens (counted once, in the budget too) come with its result;
// the parent journals the spawn, as it journals any it is told of.
func (c *Coordinator) reuseSpawn(rn *run, parent *threadRec, th *thread.Thread, callKey string, res thread.Result, r transport.Replier) {
	if rn.chargeReused(th.ID, parent.lease.Node(), res.Usage) {
		c.cfg.Metrics.ThreadReused()
	}
	c.spawned(rn, th, callKey)
	e := threadEvent(event.ThreadFinished, th)
	e.Status, e.Usage, e.Reason = res.Status, res.Own, "reused from the journal"
	c.emit(rn, e)
	rn.rec.ThreadUsage(th.ID, res.Own)
	rn.rec.Reused(th.ID)
	r.Reply(wire.Message(wire.TypeSpawnResult, wire.SpawnResult{ThreadID: th.ID, Result: res}))
}

// ended answers the parent with the helper's end.
func (sp *admittedSpawn) ended(res thread.Result, reported bool) {
	c, rn, t := sp.c, sp.rn, sp.t
	// Its end is published before its slot is free, so no watcher counts
	// more live helpers than the limit; then the slot is free at once.
	c.publish(rn.finish(t, res, c.cfg.Now()))
	sp.slot.Release()
	c.cfg.Metrics.ThreadEnded(string(res.Status), time.Since(t.admitted), true)
	if !reported {
		c.journalEnd(rn, t, res)
	}
	if w := rn.unparkParent(sp.parent); w != "" {
		c.registry.unpark(w)
	}
	// Progress goes on while the reply is sent: a result over the NATS max
	// payload is uploaded first, which may outlast the parent's patience.
	rn.mu.Lock()
	worker := t.worker
	rn.mu.Unlock()
	sp.reply.Reply(wire.Message(wire.TypeSpawnResult, wire.SpawnResult{ThreadID: t.thread.ID, Worker: worker, Result: res}))
	c.alive.remove(sp.ping)
}

// handleApproval asks the run's approver and answers the worker, denying when
// nobody answers in time.
func (c *Coordinator) handleApproval(_ context.Context, m wire.Msg, r transport.Replier) {
	var wreq wire.ApprovalRequest
	if err := wire.DecodeAs(m.Data, wire.TypeApprovalRequest, &wreq); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	rn, t, err := c.placedThread(wreq.RunID, wreq.ThreadID, wire.SenderOf(m.Subject), wreq.Token)
	if err != nil {
		c.refuse(m.Subject, err)
		r.Reply(wire.ErrorReply(err))
		return
	}
	c.relay(t, wreq.Events, m.Subject)
	req := wreq.ApprovalRequest
	req.ThreadPath = t.thread.Path // the tree here names the caller, not the request
	ping := c.alive.add(r, req.ThreadID)
	defer c.alive.remove(ping)
	r.Reply(wire.Message(wire.TypeApprovalDecision, c.approval(rn, req)))
}

// approval is the decision of req, asked once per tool call: a request
// for a call already asked about (sent again after its worker's connection
// moved, its first or its answer maybe lost) waits for the same decision,
// or has it at once.
func (c *Coordinator) approval(rn *run, req policy.ApprovalRequest) policy.Approval {
	if req.CallID == "" {
		return c.ask(rn, req)
	}
	d, first := rn.decisionOf(req.ThreadID, req.CallID)
	if first {
		d.a = c.ask(rn, req)
		close(d.done)
		return d.a
	}
	select {
	case <-d.done:
		return d.a
	case <-rn.ctx.Done():
		return policy.Approval{Reason: "the run ended"}
	}
}

// ask asks the run's approver, or holds the approval for a person to
// decide, denying when nobody answers in time.
func (c *Coordinator) ask(rn *run, req policy.ApprovalRequest) policy.Approval {
	asked := time.Now()
	c.cfg.Metrics.ApprovalAsked()
	decideAs := func(a policy.Approval, timedOut bool) policy.Approval {
		decision := metrics.DecisionDeny
		switch {
		case a.Allow:
			decision = metrics.DecisionAllow
		case timedOut:
			decision = metrics.DecisionTimeout
		}
		c.cfg.Metrics.ApprovalAnswered(decision, time.Since(asked))
		return a
	}
	decide := func(a policy.Approval) policy.Approval { return decideAs(a, false) }
	switch {
	case rn.approver == "" && c.cfg.Store != nil:
		return decideAs(c.holdApproval(rn.ctx, req))
	case rn.approver == "":
		return decide(policy.Approval{Reason: "no approver for this run"})
	}
	msg := wire.WithIDs(wire.Message(wire.TypeApprovalRequest, req), req.RunID, req.ThreadID)
	a := policy.Approval{Reason: "unexpected answer from the approver"}
	long := transport.Long{
		Subject: rn.approver,
		Request: func() wire.Msg { return msg },
		Reply: func(m wire.Msg) transport.Verdict {
			switch wire.Type(m.Type) {
			case wire.TypeProgress:
				return transport.Alive
			case wire.TypeApprovalDecision:
				if err := wire.DecodeAs(m.Data, wire.TypeApprovalDecision, &a); err != nil {
					a = policy.Approval{Reason: "bad answer from the approver"}
				}
			}
			return transport.Final
		},
		Idle: func() time.Duration { return c.cfg.ApprovalTimeout },
	}
	switch err := long.Ask(rn.ctx, c.tr); {
	case errors.Is(err, transport.ErrSilent):
		return decideAs(policy.Approval{Reason: fmt.Sprintf("no answer within %v", c.cfg.ApprovalTimeout)}, true)
	case err != nil:
		return decide(policy.Approval{Reason: "approver: " + err.Error()})
	}
	return decide(a)
}

// handleBudget settles what a thread spent since its last grant and
// answers with its next one.
func (c *Coordinator) handleBudget(_ context.Context, m wire.Msg, r transport.Replier) {
	var req wire.BudgetRenew
	if err := wire.DecodeAs(m.Data, wire.TypeBudgetRenew, &req); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	_, t, err := c.placedThread(req.RunID, req.ThreadID, wire.SenderOf(m.Subject), req.Token)
	if err != nil {
		c.refuse(m.Subject, err)
		r.Reply(wire.ErrorReply(err))
		return
	}
	r.Reply(wire.Message(wire.TypeBudgetGrant, t.lease.Renew(max(req.InputTokens, 0), max(req.OutputTokens, 0))))
}

// handlePlacementCheck answers a worker that asks, before a tool call,
// whether its placement of a thread is still current: ok, which keeps the
// placement from being given up for a loss window, or fenced.
func (c *Coordinator) handlePlacementCheck(_ context.Context, m wire.Msg, r transport.Replier) {
	var req wire.PlacementCheck
	if err := wire.DecodeAs(m.Data, wire.TypePlacementCheck, &req); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	rn, err := c.ownedRun(req.RunID)
	if err == nil {
		err = rn.vouch(req.ThreadID, wire.SenderOf(m.Subject), req.Token, time.Now())
	}
	if err != nil {
		c.refuse(m.Subject, err)
		r.Reply(wire.ErrorReply(err))
		return
	}
	r.Reply(wire.Message(wire.TypeOK, struct{}{}))
}

// handleThreadCancel cancels a helper (and its subtree) at the request of
// its parent's current placement.
func (c *Coordinator) handleThreadCancel(_ context.Context, m wire.Msg, r transport.Replier) {
	var cn wire.ThreadCancel
	if err := wire.DecodeAs(m.Data, wire.TypeCancel, &cn); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	rn, _, err := c.placedThread(cn.RunID, cn.ParentID, wire.SenderOf(m.Subject), cn.Token)
	if err != nil {
		c.refuse(m.Subject, err)
		r.Reply(wire.ErrorReply(err))
		return
	}
	if t := rn.thread(cn.ThreadID); t != nil && t.thread.ParentID == cn.ParentID {
		t.cancel(errors.New(cn.Reason))
	}
	r.Reply(wire.Message(wire.TypeOK, struct{}{}))
}

// placedThread finds thread id of run runID as placed on worker sender
// under token, or says why the message does not count.
func (c *Coordinator) placedThread(runID, id, sender, token string) (*run, *threadRec, error) {
	rn, err := c.ownedRun(runID)
	if err != nil {
		return nil, nil, err
	}
	t, err := rn.placedOn(id, sender, token)
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
func (c *Coordinator) handleRunCancel(_ context.Context, m wire.Msg, r transport.Replier) {
	var cn wire.Cancel
	if err := wire.DecodeAs(m.Data, wire.TypeCancel, &cn); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	rn := c.run(cn.RunID)
	if rn == nil {
		return // another coordinator's run: its owner answers
	}
	reason := cn.Reason
	if reason == "" {
		reason = "run cancelled"
	}
	if len(cn.ThreadIDs) > 0 {
		var found []*threadRec
		for _, id := range cn.ThreadIDs {
			t := rn.thread(id)
			if t == nil {
				r.Reply(wire.ErrorReply(&wire.Error{Code: wire.CodeNotFound, Message: "thread " + id + " is not in run " + cn.RunID}))
				return
			}
			found = append(found, t)
		}
		for _, t := range found {
			t.cancel(errors.New(reason))
		}
		r.Reply(wire.Message(wire.TypeOK, struct{}{}))
		return
	}
	rn.cancel(errors.New(reason))
	r.Reply(wire.Message(wire.TypeOK, struct{}{}))
}

func (c *Coordinator) run(id string) *run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// emit records an event in the run's record and publishes it.
func (c *Coordinator) emit(rn *run, e event.Event) {
	e.Time = c.cfg.Now()
	rn.rec.Emit(e)
	c.publish(e)
}

// journalEnd journals the end of a thread no worker reported (lost, never
// placed, cancelled before it ran); a worker that ran it to its end has
// journaled that itself.
func (c *Coordinator) journalEnd(rn *run, t *threadRec, res thread.Result) {
	c.coordJournal(rn, t.thread.ID, "", journal.Entry{Kind: journal.KindEnd, Status: res.Status, Output: res.Output,
		Error: res.Error, Usage: res.Usage, Own: res.Own})
}
