package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// Spawn admission: a worker asks for a helper of a thread it hosts, the
// coordinator derives the helper from the parent it holds, admits it
// against the run's limits and budget, places it, and answers the parent
// with its end.

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
	c.registry.park(sp.rn.parkParent(sp.parent))
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
	rn, parent, err := c.placedThread(req.RunID, req.ParentID, m.Subject, req.Token)
	if err != nil {
		r.Reply(wire.ErrorReply(err))
		return nil
	}
	c.relay(rn, parent, req.Events, m.Subject)
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
	parent.lease.Release(limits.SpendOf(req.ParentSpent))
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
	child := node.Child(th.Agent.Helper.Budget)
	rn.add(t, parent, child)
	if child != node {
		// Its own duration budget ends its subtree when it runs out.
		rn.watchDuration(t, child, c.cfg.Now(), t.cancel)
	}
	t.setup = rn.helperSetup(parent, th, req.Handoffs)
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
	c.registry.park(rn.parkParent(parent))
	select {
	case <-t.ended:
	case <-parent.ctx.Done():
	}
	c.registry.unpark(rn.unparkParent(parent))
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
	res = endedAs(t, res)
	// Its end is published before its slot is free, so no watcher counts
	// more live helpers than the limit; then the slot is free at once.
	c.publish(rn.finish(t, res, c.cfg.Now()))
	sp.slot.Release()
	c.cfg.Metrics.ThreadEnded(string(res.Status), time.Since(t.admitted), true)
	if !reported {
		c.journalEnd(rn, t, res)
	}
	c.registry.unpark(rn.unparkParent(sp.parent))
	// Progress goes on while the reply is sent: a result over the NATS max
	// payload is uploaded first, which may outlast the parent's patience.
	rn.mu.Lock()
	worker := t.worker
	rn.mu.Unlock()
	sp.reply.Reply(wire.Message(wire.TypeSpawnResult, wire.SpawnResult{ThreadID: t.thread.ID, Worker: worker, Result: res}))
	c.alive.remove(sp.ping)
}
