package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/actor"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/wire"
)

// spawner sends a thread's spawns to the coordinator that owns its run.
type spawner Worker

// Only the parent's identity, its placement token and the tool's arguments
// travel: the coordinator derives the helper from the parent it holds.
//
// The call's goroutine waits here as long as the helper runs, so this
// frame stays small: the request is built, and each reply read, in
// functions of their own, and the goroutine's stack fits in a few KiB.
func (s *spawner) Spawn(ctx context.Context, req *runner.SpawnRequest) (thread.Result, error) {
	w := (*Worker)(s)
	coord, token := w.placement(req.ParentID)
	w.park(req.ParentID)
	defer w.unpark(ctx, req.ParentID)

	msg := w.spawnMsg(ctx, req, token)
	subject := wire.SubjectSpawn(coord, w.cfg.ID)
	sentAt := w.cfg.Conn.Stats().Reconnects // the connection's moves when the request was last sent
	call, err := w.tr.Request(ctx, subject, msg)
	if err != nil {
		return thread.Result{}, w.coordinatorFailed(req.ParentID, coord, fmt.Errorf("coordinator %s unreachable: %w", coord, err))
	}
	defer func() { call.Close() }()
	child := ""
	heard := time.Now()
	for {
		m, err := call.Next(ctx, w.silence(coord))
		if err != nil && ctx.Err() == nil && errors.Is(err, actor.ErrSilent) {
			// Asking again is safe: the helper's id derives from the call,
			// so the coordinator answers a request it has seen with the
			// helper it has (its result, if it has ended).
			if w.askAgain(ctx, subject, &msg, &call, &sentAt) {
				heard = time.Now()
				continue
			}
			if w.patient(coord, heard) {
				continue
			}
		}
		heard = time.Now()
		if err != nil {
			return w.spawnFailed(ctx, req, coord, token, child, err)
		}
		if res, done, err := w.spawnReply(m, req, coord, &child); done {
			return res, err
		}
	}
}

// spawnMsg is the spawn request of req, with the parent's events waiting
// to go and its trace.
//
//go:noinline
func (w *Worker) spawnMsg(ctx context.Context, req *runner.SpawnRequest, token string) wire.Msg {
	wreq := wire.SpawnRequest{RunID: req.RunID, ParentID: req.ParentID, Token: token, CallID: req.CallID,
		Name: req.Name, Task: req.Task, Handoffs: req.Handoffs, ParentSpent: req.ParentSpent,
		Events: w.takeEvents(req.ParentID)}
	msg := wire.WithIDs(wreq.Msg(), req.RunID, req.ParentID)
	msg.Header = tracing.Inject(ctx, msg.Header) // the helper's span nests under this execute_tool agent span
	return msg
}

// spawnReply reads one reply to a spawn; done says it is the last, with
// the helper's result or why there is none. A keep-alive that names the
// helper first tells the parent its id (child).
//
//go:noinline
func (w *Worker) spawnReply(m wire.Msg, req *runner.SpawnRequest, coord string, child *string) (res thread.Result, done bool, err error) {
	switch wire.Type(m.Type) {
	case wire.TypeProgress:
		var p wire.Progress
		if wire.DecodeAs(m.Data, wire.TypeProgress, &p) == nil && p.ThreadID != "" && *child == "" {
			*child = p.ThreadID
			req.ReportAdmitted(p.ThreadID)
		}
		return thread.Result{}, false, nil
	case wire.TypeSpawnResult:
		var sr wire.SpawnResult
		if err := wire.DecodeAs(m.Data, wire.TypeSpawnResult, &sr); err != nil {
			return thread.Result{}, true, err
		}
		if sr.Refusal != "" {
			return thread.Result{}, true, &limits.Refusal{Reason: sr.Refusal, Kind: sr.Budget}
		}
		if *child == "" && sr.ThreadID != "" {
			req.ReportAdmitted(sr.ThreadID) // it ended before its first keep-alive
		}
		return sr.Result, true, nil
	default:
		if err := wire.MsgError(m); err != nil {
			return thread.Result{}, true, w.coordinatorFailed(req.ParentID, coord, err)
		}
		return thread.Result{}, true, fmt.Errorf("%w: unexpected %s reply to a spawn", wire.ErrBadMessage, m.Type)
	}
}

// spawnFailed ends a spawn whose call failed with err: a cancelled parent
// cancels its helper (child, or the id its call derives), anything else
// is the coordinator's failure.
//
//go:noinline
func (w *Worker) spawnFailed(ctx context.Context, req *runner.SpawnRequest, coord, token, child string, err error) (thread.Result, error) {
	if ctx.Err() == nil {
		return thread.Result{}, w.coordinatorFailed(req.ParentID, coord, err)
	}
	// A superseded parent leaves its helpers alone: they are its current
	// placement's now, and the coordinator refuses a cancel from this one
	// anyway.
	if child == "" && req.CallID != "" {
		// Not heard of yet (admitted within a heartbeat, or not at all):
		// the call's helper has the id its call derives.
		child = journal.ThreadID(req.RunID, req.ParentID, req.CallID)
	}
	if child != "" && !w.superseded(req.ParentID) {
		w.cancelRemote(coord, req.RunID, req.ParentID, token, child, context.Cause(ctx))
	}
	return thread.Result{Status: event.Cancelled, Error: "cancelled"}, nil
}

// park frees the slot of a thread that waits on helpers.
func (w *Worker) park(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.threads[id]
	if !ok {
		return
	}
	h.spawning++
	if h.hasSlot {
		h.hasSlot = false
		<-w.slots
	}
}

// unpark takes a slot back when the thread's last outstanding spawn ends. A
// cancelled thread gives up waiting: it is about to end and needs no slot.
func (w *Worker) unpark(ctx context.Context, id string) {
	w.mu.Lock()
	h, ok := w.threads[id]
	if ok {
		h.spawning--
	}
	if !ok || h.spawning > 0 || h.hasSlot {
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	w.mu.Lock()
	if h.spawning > 0 { // parked again meanwhile
		<-w.slots
	} else {
		h.hasSlot = true
	}
	w.mu.Unlock()
}

// SpawnPatience bounds how long a spawn call may hear nothing while its
// coordinator's heartbeats keep coming: a coordinator admitting thousands of
// spawns at once (one model turn of a wide fan-out) answers the last ones
// seconds late, and a busy coordinator is not a lost one. Past it, or as
// soon as the coordinator itself goes silent, the call is given up.
const SpawnPatience = time.Minute

// patient says whether a spawn call that has heard nothing since heard
// should go on waiting: its coordinator was heard from within the loss
// window, and the call's silence is within SpawnPatience.
func (w *Worker) patient(coord string, heard time.Time) bool {
	now := time.Now()
	if now.Sub(heard) >= SpawnPatience {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.coords[coord]
	return c != nil && c.fresh(now)
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
	subject := wire.SubjectApproval(coord, w.cfg.ID)
	sentAt := w.cfg.Conn.Stats().Reconnects
	call, err := w.tr.Request(ctx, subject, msg)
	if err != nil {
		return policy.Approval{}, w.coordinatorFailed(req.ThreadID, coord, err)
	}
	defer func() { call.Close() }()
	for {
		m, err := call.Next(ctx, w.silence(coord))
		// The coordinator answers the same call asked again with the same
		// decision.
		if err != nil && ctx.Err() == nil && errors.Is(err, actor.ErrSilent) && req.CallID != "" &&
			w.askAgain(ctx, subject, &msg, &call, &sentAt) {
			continue
		}
		if err != nil {
			return policy.Approval{}, w.coordinatorFailed(req.ThreadID, coord, err)
		}
		switch wire.Type(m.Type) {
		case wire.TypeProgress:
			continue
		case wire.TypeApprovalDecision:
			var d policy.Approval
			err := wire.DecodeAs(m.Data, wire.TypeApprovalDecision, &d)
			return d, err
		}
		if err := wire.MsgError(m); err != nil {
			return policy.Approval{}, w.coordinatorFailed(req.ThreadID, coord, err)
		}
		return policy.Approval{}, fmt.Errorf("%w: unexpected %s reply to an approval", wire.ErrBadMessage, m.Type)
	}
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
	fenced := fencedReply(err)
	if fenced || disowned || errors.Is(err, actor.ErrSilent) || errors.Is(err, actor.ErrNoResponders) {
		w.mu.Lock()
		h := w.threads[thread]
		w.mu.Unlock()
		if h != nil && h.cancel != nil {
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
	case errors.Is(err, actor.ErrNoResponders):
		return fmt.Errorf("%s is not answering: %w", peer, err)
	case errors.Is(err, actor.ErrSilent):
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

// askAgain sends msg to subject once more, on a new call that replaces
// *call, when a request gone silent was sent before the worker's
// connection last moved to another server (*sentAt, the connection's
// reconnects when it was sent): the request, its keep-alives or its answer
// may have gone with the old server. What was heard since does not count:
// a keep-alive the old server delivered may be read only after the move.
// False means it did not ask: the silence is the peer's.
func (w *Worker) askAgain(ctx context.Context, subject string, msg *wire.Msg, call *actor.Call, sentAt *uint64) bool {
	now := w.cfg.Conn.Stats().Reconnects
	if now == *sentAt {
		return false
	}
	again, err := w.tr.Request(ctx, subject, *msg)
	if err != nil {
		return false
	}
	(*call).Close()
	*call, *sentAt = again, now
	return true
}
