package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// spawner sends a thread's spawns to the coordinator that owns its run.
type spawner Worker

// Spawn asks the coordinator that owns the run for req's helper. Only the
// parent's identity, its placement token and the tool's arguments travel:
// the coordinator derives the helper from the parent it holds.
//
// The call waits as a long request (transport.Long), which gives its
// coordinator a loss window and one heartbeat more before it looks at the
// coordinator's own heartbeats (patience): a worker that stood still reads
// the keep-alives that waited in its socket first. No goroutine waits for
// it, so a parent of ten thousand helpers holds ten thousand records,
// not ten thousand stacks. Asking again after the connection moved is
// safe: the helper's id derives from the call, so the coordinator answers a
// request it has seen with the helper it has (its result, if it has ended).
func (s *spawner) Spawn(ctx context.Context, req *runner.SpawnRequest, call runner.SpawnCall) {
	w := (*Worker)(s)
	sc := &spawnCall{w: w, ctx: ctx, req: req, call: call}
	sc.coord, sc.token = w.placement(req.ParentID)
	if !w.park(req.ParentID) {
		go call.Ended(thread.Result{}, fmt.Errorf("thread %s is not on worker %s", req.ParentID, w.cfg.ID))
		return
	}
	msg := w.spawnMsg(ctx, req, sc.token)
	sc.long = transport.Long{
		Subject:  wire.SubjectSpawn(sc.coord, w.cfg.ID),
		Request:  func() wire.Msg { return msg },
		Reply:    sc.reply,
		End:      sc.end,
		Idle:     func() time.Duration { return w.silence(sc.coord) + w.cfg.HeartbeatInterval },
		Tolerate: func(heard, now time.Time) time.Time { return w.patience(sc.coord, heard, now) },
		Moves:    w.reconnects,
		Cancel:   sc.cancel,
	}
	sc.long.Start(ctx, w.tr)
}

// spawnCall is one spawn waiting on its helper.
type spawnCall struct {
	w     *Worker
	ctx   context.Context
	req   *runner.SpawnRequest
	call  runner.SpawnCall
	coord string
	token string
	long  transport.Long

	// reports are the calls of call.Admitted under way: it journals, which
	// may wait, so it runs apart from the reply that named the helper, and
	// the call ends after it. A helper named by its result (unheard of
	// until it ended) is reported by ended, before the end (named).
	reports sync.WaitGroup
	named   string

	// Set by the replies, one at a time, before the request's end.
	child             string // the helper's id, once named
	res               thread.Result
	err               error
	coordinatorFailed bool
}

// reply judges one of the coordinator's replies: any of them shows it
// alive.
func (sc *spawnCall) reply(m wire.Msg) transport.Verdict {
	switch wire.Type(m.Type) {
	case wire.TypeProgress:
		var p wire.Progress
		if wire.DecodeAs(m.Data, wire.TypeProgress, &p) == nil && p.ThreadID != "" && sc.child == "" {
			sc.child = p.ThreadID
			sc.reports.Go(func() { sc.call.Admitted(p.ThreadID) })
		}
		return transport.Alive
	case wire.TypeSpawnResult:
		var sr wire.SpawnResult
		switch err := wire.DecodeAs(m.Data, wire.TypeSpawnResult, &sr); {
		case err != nil:
			sc.err = err
		case sr.Refusal != "":
			sc.err = &limits.Refusal{Reason: sr.Refusal, Kind: sr.Budget}
		default:
			if sc.child == "" && sr.ThreadID != "" {
				sc.named = sr.ThreadID // it ended before its first keep-alive
			}
			sc.res = sr.Result
		}
	default:
		sc.err = wire.MsgError(m)
		sc.coordinatorFailed = sc.err != nil
		if sc.err == nil {
			sc.err = fmt.Errorf("%w: unexpected %s reply to a spawn", wire.ErrBadMessage, m.Type)
		}
	}
	return transport.Final
}

// end takes the request's end: its answer, the coordinator's failure, or
// the parent's cancel.
func (sc *spawnCall) end(err error) {
	switch {
	case errors.Is(err, transport.ErrCancelled):
		sc.ended(thread.Result{Status: event.Cancelled, Error: "cancelled"}, nil, false)
	case err != nil:
		sc.ended(thread.Result{}, err, true)
	default:
		sc.ended(sc.res, sc.err, sc.coordinatorFailed)
	}
}

// cancel runs when the parent's context ends: the helper is cancelled too
// (the one named, or the id its call derives when none was yet), unless
// the parent was superseded: its helpers are its current placement's now,
// and the coordinator refuses a cancel from this one anyway.
func (sc *spawnCall) cancel(cause error) {
	req, child := sc.req, sc.child
	if child == "" && req.CallID != "" {
		child = journal.ThreadID(req.RunID, req.ParentID, req.CallID)
	}
	if child != "" && !sc.w.superseded(req.ParentID) {
		sc.w.cancelRemote(sc.coord, req.RunID, req.ParentID, sc.token, child, cause)
	}
}

// ended tells the parent how its call ended, once its helper's id is
// journaled and its slot is back; a coordinator's failure is answered
// first (coordinatorFailed).
func (sc *spawnCall) ended(res thread.Result, err error, coordinatorFailed bool) {
	if coordinatorFailed {
		err = sc.w.coordinatorFailed(sc.req.ParentID, sc.coord, err)
	}
	if sc.named != "" {
		sc.call.Admitted(sc.named)
	}
	sc.reports.Wait()
	sc.w.unpark(sc.ctx, sc.req.ParentID)
	sc.call.Ended(res, err)
}

// spawnMsg is the spawn request of req, with the parent's events waiting
// to go and its trace.
func (w *Worker) spawnMsg(ctx context.Context, req *runner.SpawnRequest, token string) wire.Msg {
	wreq := wire.SpawnRequest{RunID: req.RunID, ParentID: req.ParentID, Token: token, CallID: req.CallID,
		Name: req.Name, Task: req.Task, Handoffs: req.Handoffs, ParentSpent: req.ParentSpent,
		Events: w.takeEvents(req.ParentID)}
	msg := wire.WithIDs(wire.Message(wire.TypeSpawnRequest, wreq), req.RunID, req.ParentID)
	msg.Header = tracing.Inject(ctx, msg.Header) // the helper's span nests under this execute_tool agent span
	return msg
}

// park frees the slot of a thread that waits on helpers and counts its
// spawn in flight; false means the thread is not here.
func (w *Worker) park(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.threads[id]
	if !ok {
		return false
	}
	w.freeSlotLocked(h)
	h.spawning++
	return true
}

// unpark counts a spawn of thread id ended and takes the thread's slot
// back when its last one ends (retakeSlot).
func (w *Worker) unpark(ctx context.Context, id string) {
	w.mu.Lock()
	h := w.threads[id]
	if h != nil {
		h.spawning--
	}
	w.mu.Unlock()
	if h != nil {
		_ = w.retakeSlot(ctx, h)
	}
}

// retakeSlot gives hosted thread h its slot back, waiting for a free one,
// unless it holds one, waits on helpers or has ended. A cancelled thread
// (ctx) gives up waiting, with the cancel's cause: it is about to end and
// needs no slot.
func (w *Worker) retakeSlot(ctx context.Context, h *hosted) error {
	needs := func() bool { return w.threads[h.thread.ID] == h && h.spawning == 0 && !h.hasSlot }
	w.mu.Lock()
	need := needs()
	w.mu.Unlock()
	if !need {
		return nil
	}
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if needs() {
		h.hasSlot = true
	} else { // parked again or ended meanwhile: finish freed no slot
		<-w.slots
	}
	return nil
}

// SpawnPatience bounds how long a spawn call may hear nothing while its
// coordinator's heartbeats keep coming: a coordinator admitting thousands of
// spawns at once (one model turn of a wide fan-out) answers the last ones
// seconds late, and a busy coordinator is not a lost one. Past it, or as
// soon as the coordinator itself goes silent, the call is given up.
const SpawnPatience = time.Minute

// patience bears the silence of a spawn call heard from last at heard
// until the next heartbeat, while its coordinator was heard from within
// the loss window and the call's silence is within SpawnPatience.
func (w *Worker) patience(coord string, heard, now time.Time) time.Time {
	if now.Sub(heard) >= SpawnPatience {
		return time.Time{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.coords[coord]
	if c == nil || !c.fresh(now) {
		return time.Time{}
	}
	return now.Add(w.cfg.HeartbeatInterval)
}

// silence is how long a coordinator may say nothing before it is presumed lost.
func (w *Worker) silence(coord string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	interval := w.cfg.HeartbeatInterval
	if c := w.coords[coord]; c != nil && c.interval > interval {
		interval = c.interval
	}
	return MissedHeartbeats * interval
}

func (w *Worker) cancelRemote(coord, run, parent, token, thread string, cause error) {
	reason := "cancelled by its parent"
	if cause != nil {
		reason = cause.Error()
	}
	c := wire.ThreadCancel{RunID: run, ParentID: parent, Token: token, ThreadID: thread, Reason: reason}
	w.tr.Publish(context.Background(), wire.SubjectThreadCancel(coord, w.cfg.ID), wire.Message(wire.TypeCancel, c))
}

// approver asks the run's coordinator, which asks whoever answers for the run.
type approver Worker

func (a *approver) Approve(ctx context.Context, req policy.ApprovalRequest) (policy.Approval, error) {
	w := (*Worker)(a)
	coord, token := w.placement(req.ThreadID)
	wreq := wire.ApprovalRequest{ApprovalRequest: req, Token: token, Events: w.takeEvents(req.ThreadID)}
	msg := wire.WithIDs(wire.Message(wire.TypeApprovalRequest, wreq), req.RunID, req.ThreadID)
	var d policy.Approval
	var answerErr, refused error
	long := transport.Long{
		Subject: wire.SubjectApproval(coord, w.cfg.ID),
		Request: func() wire.Msg { return msg },
		Reply: func(m wire.Msg) transport.Verdict {
			switch wire.Type(m.Type) {
			case wire.TypeProgress:
				return transport.Alive
			case wire.TypeApprovalDecision:
				answerErr = wire.DecodeAs(m.Data, wire.TypeApprovalDecision, &d)
			default:
				if refused = wire.MsgError(m); refused == nil {
					answerErr = fmt.Errorf("%w: unexpected %s reply to an approval", wire.ErrBadMessage, m.Type)
				}
			}
			return transport.Final
		},
		Idle: func() time.Duration { return w.silence(coord) },
	}
	if req.CallID != "" {
		// The coordinator answers the same call asked again with the
		// same decision.
		long.Moves = w.reconnects
	}
	if err := long.Ask(ctx, w.tr); err != nil {
		if errors.Is(err, transport.ErrCancelled) {
			return policy.Approval{}, ctx.Err()
		}
		return policy.Approval{}, w.coordinatorFailed(req.ThreadID, coord, err)
	}
	if refused != nil {
		return policy.Approval{}, w.coordinatorFailed(req.ThreadID, coord, refused)
	}
	return d, answerErr
}

// coordinatorFailed handles a thread's request its coordinator did not
// answer: when the coordinator is gone (silent, or nobody listens) or
// refuses the placement as superseded (fenced), the
// thread is cancelled at once (so too when the coordinator no longer knows
// the run: it restarted), before the failed request becomes a tool
// result its journal would keep. The run's next coordinator runs the
// thread again from its journal instead.
func (w *Worker) coordinatorFailed(thread, coord string, err error) error {
	err = peerError("coordinator "+coord, err)
	disowned := errors.Is(err, wire.ErrNotFound) // a coordinator that restarted
	fenced := errors.Is(err, wire.ErrFenced)     // the placement is superseded
	if fenced || disowned || errors.Is(err, transport.ErrSilent) || errors.Is(err, transport.ErrNoResponders) {
		if h := w.hostedThread(thread); h != nil {
			h.cancel(err)
		}
	}
	if fenced {
		w.fenceThread(thread, 0, err.Error())
	}
	return err
}

// peerError names what went wrong with a peer in words a tool result can carry.
func peerError(peer string, err error) error {
	switch {
	case errors.Is(err, transport.ErrNoResponders):
		return fmt.Errorf("%s is not answering: %w", peer, err)
	case errors.Is(err, transport.ErrSilent):
		return fmt.Errorf("%s went silent: %w", peer, err)
	}
	return err
}

// noScripted refuses scripted:<file> models: the run names a file on this
// machine. A worker opens them only with --allow-scripted.
type noScripted struct{ runner.ModelOpener }

func (n noScripted) Open(ref string) (model.Model, error) {
	if r, err := model.ParseRef(ref); err == nil && r.Provider == "scripted" {
		return nil, fmt.Errorf("%w: %s: scripted models are for tests; this worker was started without --allow-scripted", model.ErrBadRef, ref)
	}
	return n.ModelOpener.Open(ref)
}

// reconnects is how often the worker's connection moved to another server.
func (w *Worker) reconnects() uint64 { return w.cfg.Conn.Stats().Reconnects }
