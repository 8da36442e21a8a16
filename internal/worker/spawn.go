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
// The call then waits as data (spawnCall): its replies are taken on the
// transport's delivery goroutine, its silence at the worker's heartbeats
// (tick) and its cancel with its thread's context, and no goroutine waits
// for it: a parent of ten thousand helpers holds ten thousand records, not
// ten thousand stacks.
func (s *spawner) Spawn(ctx context.Context, req *runner.SpawnRequest, call runner.SpawnCall) {
	w := (*Worker)(s)
	sc := &spawnCall{w: w, ctx: ctx, req: req, call: call}
	sc.coord, sc.token = w.placement(req.ParentID)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !w.park(sc) {
		sc.endLocked(thread.Result{}, fmt.Errorf("thread %s is not on worker %s", req.ParentID, w.cfg.ID), false)
		return
	}
	sc.msg = w.spawnMsg(ctx, req, sc.token)
	sc.subject = wire.SubjectSpawn(sc.coord, w.cfg.ID)
	sc.sentAt = w.reconnects()
	stop, err := w.tr.RequestFunc(ctx, sc.subject, sc.msg, sc.reply)
	if err != nil {
		sc.failedLocked(fmt.Errorf("coordinator %s unreachable: %w", sc.coord, err))
		return
	}
	sc.stop, sc.heard = stop, time.Now()
	sc.idle = w.silence(sc.coord)
	if ctx.Err() != nil {
		// Cancelled before it was parked, when the thread's cancel hook
		// could not see it.
		sc.cancelledLocked()
	}
}

// spawnCall is one spawn waiting on its helper.
type spawnCall struct {
	w       *Worker
	ctx     context.Context
	req     *runner.SpawnRequest
	call    runner.SpawnCall
	coord   string
	token   string
	subject string
	msg     wire.Msg // the request, asked again after a reconnect

	// reports are the calls of call.Admitted under way: it journals, which
	// may wait, so it runs apart from the reply that named the helper, and
	// the call ends after it. A helper named by its result (unheard of
	// until it ended) is reported by ended, before the end (named).
	reports sync.WaitGroup
	named   string

	mu     sync.Mutex
	stop   func()        // ends the current request's replies
	sentAt uint64        // the connection's moves when the request was last sent
	heard  time.Time     // when the coordinator last answered the call
	idle   time.Duration // the silence after which the coordinator is presumed lost
	child  string        // the helper's id, once named
	over   bool
}

// reply takes one of the coordinator's replies, on the transport's
// delivery goroutine: it decides at once and never blocks.
func (sc *spawnCall) reply(m wire.Msg, err error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.over {
		return
	}
	sc.heard = time.Now()
	if err != nil {
		sc.failedLocked(err)
		return
	}
	switch wire.Type(m.Type) {
	case wire.TypeProgress:
		var p wire.Progress
		if wire.DecodeAs(m.Data, wire.TypeProgress, &p) == nil && p.ThreadID != "" && sc.child == "" {
			sc.admitted(p.ThreadID)
		}
	case wire.TypeSpawnResult:
		var sr wire.SpawnResult
		if err := wire.DecodeAs(m.Data, wire.TypeSpawnResult, &sr); err != nil {
			sc.endLocked(thread.Result{}, err, false)
			return
		}
		if sr.Refusal != "" {
			sc.endLocked(thread.Result{}, &limits.Refusal{Reason: sr.Refusal, Kind: sr.Budget}, false)
			return
		}
		if sc.child == "" && sr.ThreadID != "" {
			sc.named = sr.ThreadID // it ended before its first keep-alive
		}
		sc.endLocked(sr.Result, nil, false)
	default:
		if err := wire.MsgError(m); err != nil {
			sc.failedLocked(err)
			return
		}
		sc.endLocked(thread.Result{}, fmt.Errorf("%w: unexpected %s reply to a spawn", wire.ErrBadMessage, m.Type), false)
	}
}

// admitted tells the parent its helper's id, once.
func (sc *spawnCall) admitted(child string) {
	sc.child = child
	sc.reports.Go(func() { sc.call.Admitted(child) })
}

// silent runs at each of the worker's heartbeats: a call that has heard
// nothing for its loss window asks again if the connection moved since it
// was sent, waits on while its coordinator's heartbeats come (patient), or
// ends. Asking again is safe: the helper's id derives from the call, so the
// coordinator answers a request it has seen with the helper it has (its
// result, if it has ended).
func (sc *spawnCall) silent(now time.Time) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.over || now.Sub(sc.heard) < sc.idle {
		return
	}
	if sc.ctx.Err() != nil {
		sc.cancelledLocked()
		return
	}
	w := sc.w
	sc.idle = w.silence(sc.coord)
	if sc.askAgainLocked() || w.patient(sc.coord, sc.heard) {
		return
	}
	sc.failedLocked(fmt.Errorf("spawn %s: no reply for %v: %w", sc.subject, now.Sub(sc.heard).Round(time.Millisecond), transport.ErrSilent))
}

// failedLocked ends a call its coordinator did not answer (err), or a
// cancelled one.
func (sc *spawnCall) failedLocked(err error) {
	if sc.ctx.Err() != nil {
		sc.cancelledLocked()
		return
	}
	sc.endLocked(thread.Result{}, err, true)
}

// askAgainLocked is askAgain for the call's request, which a new one
// replaces.
func (sc *spawnCall) askAgainLocked() bool {
	now := sc.w.reconnects()
	if now == sc.sentAt {
		return false
	}
	stop, err := sc.w.tr.RequestFunc(sc.ctx, sc.subject, sc.msg, sc.reply)
	if err != nil {
		return false
	}
	sc.stop()
	sc.stop, sc.sentAt, sc.heard = stop, now, time.Now()
	return true
}

// cancelled runs when the thread's context ends: the helper is cancelled too
// (the one named, or the id its call derives when none was yet), unless the
// parent was superseded: its helpers are its current placement's now, and
// the coordinator refuses a cancel from this one anyway.
func (sc *spawnCall) cancelled() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !sc.over {
		sc.cancelledLocked()
	}
}

func (sc *spawnCall) cancelledLocked() {
	req, child := sc.req, sc.child
	if child == "" && req.CallID != "" {
		child = journal.ThreadID(req.RunID, req.ParentID, req.CallID)
	}
	if child != "" && !sc.w.superseded(req.ParentID) {
		sc.w.cancelRemote(sc.coord, req.RunID, req.ParentID, sc.token, child, context.Cause(sc.ctx))
	}
	sc.endLocked(thread.Result{Status: event.Cancelled, Error: "cancelled"}, nil, false)
}

// endLocked decides the call's end, once; the parent hears of it on a
// goroutine of its own, since that may wait (its journal, its slot back).
// coordinatorFailed says err is the coordinator's failure (gone, silent,
// refusing the placement), which the thread answers first.
func (sc *spawnCall) endLocked(res thread.Result, err error, coordinatorFailed bool) {
	if sc.over {
		return
	}
	sc.over = true
	if sc.stop != nil {
		sc.stop()
	}
	go sc.ended(res, err, coordinatorFailed)
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
	sc.w.unpark(sc)
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

// park frees the slot of a thread that waits on helpers, and holds its
// spawn call sc, which the thread's end cancels (cancelCalls); false means
// the thread is not here. The hook on the thread's context is made once, at
// its first spawn.
func (w *Worker) park(sc *spawnCall) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.threads[sc.req.ParentID]
	if !ok {
		return false
	}
	w.freeSlotLocked(h)
	if h.calls == nil {
		h.calls = make(map[*spawnCall]struct{})
		h.stopCalls = context.AfterFunc(h.ctx, func() { w.cancelCalls(h) })
	}
	h.calls[sc] = struct{}{}
	return true
}

// cancelCalls cancels the spawn calls of thread h, whose context ended.
func (w *Worker) cancelCalls(h *hosted) {
	w.mu.Lock()
	calls := make([]*spawnCall, 0, len(h.calls))
	for sc := range h.calls {
		calls = append(calls, sc)
	}
	w.mu.Unlock()
	for _, sc := range calls {
		sc.cancelled()
	}
}

// unpark lets spawn call sc go and takes the thread's slot back when its
// last outstanding spawn ends. A cancelled thread gives up waiting: it is
// about to end and needs no slot.
func (w *Worker) unpark(sc *spawnCall) {
	w.mu.Lock()
	h, ok := w.threads[sc.req.ParentID]
	if ok {
		delete(h.calls, sc)
	}
	if !ok || len(h.calls) > 0 || h.hasSlot {
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	select {
	case w.slots <- struct{}{}:
	case <-sc.ctx.Done():
		return
	}
	w.mu.Lock()
	if len(h.calls) > 0 { // parked again meanwhile
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
	sentAt := w.reconnects()
	call, err := w.tr.Request(ctx, subject, msg)
	if err != nil {
		return policy.Approval{}, w.coordinatorFailed(req.ThreadID, coord, err)
	}
	defer func() { call.Close() }()
	for {
		m, err := call.Next(ctx, w.silence(coord))
		// The coordinator answers the same call asked again with the same
		// decision.
		if err != nil && ctx.Err() == nil && errors.Is(err, transport.ErrSilent) && req.CallID != "" &&
			w.askAgain(ctx, subject, msg, &call, &sentAt) {
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
	if fenced || disowned || errors.Is(err, transport.ErrSilent) || errors.Is(err, transport.ErrNoResponders) {
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

// askAgain sends msg to subject once more, on a new call that replaces
// *call, when a request gone silent was sent before the worker's
// connection last moved to another server (*sentAt, the connection's
// reconnects when it was sent): the request, its keep-alives or its answer
// may have gone with the old server. What was heard since does not count:
// a keep-alive the old server delivered may be read only after the move.
// False means it did not ask: the silence is the peer's.
func (w *Worker) askAgain(ctx context.Context, subject string, msg wire.Msg, call *transport.Call, sentAt *uint64) bool {
	now := w.reconnects()
	if now == *sentAt {
		return false
	}
	again, err := w.tr.Request(ctx, subject, msg)
	if err != nil {
		return false
	}
	(*call).Close()
	*call, *sentAt = again, now
	return true
}

// reconnects is how often the worker's connection moved to another server.
func (w *Worker) reconnects() uint64 { return w.cfg.Conn.Stats().Reconnects }
