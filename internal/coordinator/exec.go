package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/actor"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/wire"
)

// outcome says how one placement of a thread went.
type outcome int

const (
	ended   outcome = iota // the worker answered with the thread's result
	busy                   // the worker had no slot; place elsewhere
	gone                   // nobody listens on the worker's subject; place again at once
	lost                   // the worker went silent mid-thread; place again (bounded)
	aborted                // cancelled here before the worker answered
)

// execThread places a thread and waits for its end, placing it again when its
// worker is lost (up to MaxAttempts). The result is always final; reported
// says whether a worker ran the thread to its end (and journaled it), so the
// coordinator journals the end otherwise. Its thread.finished is always the
// coordinator's (run.finish).
func (c *Coordinator) execThread(r *run, t *threadRec) (res runner.Result, reported bool) {
	attempts, placements := 0, 0
	reread := false // an earlier placement may have journaled more
	for {
		if err := t.ctx.Err(); err != nil {
			return runner.Cancelled(t.ctx), false
		}
		waitFrom := time.Now()
		wid, err := c.registry.placeNotify(t.ctx, c.cfg.PlacementTimeout, t.thread.Agent.Harness.MCP,
			func(workers int) { c.waiting(r, t, workers) })
		c.cfg.Metrics.PlacementWaited(time.Since(waitFrom))
		if err != nil {
			if t.ctx.Err() != nil {
				return runner.Cancelled(t.ctx), false
			}
			c.cfg.Metrics.Placement(metrics.OutcomeTimeout)
			c.cfg.Logger.Warn("placement timed out", "run_id", t.thread.RunID, "thread_id", t.thread.ID, "name", t.thread.Name, "err", err)
			return runner.Failed(fmt.Sprintf("no worker available: %v", err)), false
		}
		ctx := r.startAttempt(t)
		placements++
		// Placed before the request is sent: the worker may spawn at once.
		tok := r.place(t, wid, placements)
		c.journalPlacement(r, t, wid, placements, tok)
		t.replay = c.replayOf(r, t, reread)
		replays := c.accountReplay(r, t)
		res, out := c.execOn(ctx, r, t, wid, placements, tok)
		if replays && out != busy {
			c.cfg.Metrics.JournalReplayed()
		}
		r.unplace(t)
		c.registry.release(wid)
		switch out {
		case ended:
			r.endAttempt(t, nil)
			return res, true
		case aborted:
			r.endAttempt(t, nil)
			return res, false
		case busy:
			c.cfg.Metrics.Placement(metrics.OutcomeBusy)
			r.endAttempt(t, nil)
			c.registry.busy(wid)
		case gone:
			c.cfg.Metrics.Placement(metrics.OutcomeNoResponders)
			c.fence(wid, t.thread.ID, placements)
			reread = true
			r.endAttempt(t, errors.New("worker gone"))
			if c.registry.forget(wid) {
				c.workerLost(wid, "no responders")
			}
			c.replaced(t, wid, "worker "+wid+" not answering")
		case lost:
			c.cfg.Metrics.Placement(metrics.OutcomeLost)
			attempts++
			c.fence(wid, t.thread.ID, placements)
			reread = true
			r.endAttempt(t, fmt.Errorf("worker %s lost", wid))
			if c.registry.forget(wid) {
				c.workerLost(wid, "silent during a thread")
			}
			if attempts >= c.cfg.MaxAttempts {
				return runner.Failed("worker lost"), false
			}
			c.cfg.Logger.Warn("placing thread again", "run_id", t.thread.RunID, "thread_id", t.thread.ID, "name", t.thread.Name, "attempt", attempts+1)
			c.replaced(t, wid, "worker "+wid+" lost")
		}
	}
}

// replaced publishes that t is being placed again, away from worker wid.
//
//go:noinline
func (c *Coordinator) replaced(t *threadRec, wid, reason string) {
	e := threadEvent(event.ThreadReplaced, t.thread)
	e.Worker, e.Reason = wid, reason
	c.publish(e)
}

// waiting tells the run's watchers that t waits for a worker slot, and
// whether any worker is registered at all.
func (c *Coordinator) waiting(r *run, t *threadRec, workers int) {
	e := threadEvent(event.ThreadWaiting, t.thread)
	e.Reason = event.WaitingForWorker
	if workers == 0 {
		e.Reason += " (none is registered)"
	}
	c.emit(r, e)
}

// execOn runs one placement of t on worker wid. Its goroutine waits here for
// the whole life of the thread, so what builds messages and events lives in
// functions of their own: their large values never sit on this frame.
func (c *Coordinator) execOn(ctx context.Context, r *run, t *threadRec, wid string, attempt int, tok string) (runner.Result, outcome) {
	call, err := c.execTr.Request(ctx, wire.SubjectExec(wid), c.execRequest(t, attempt, tok))
	if err != nil {
		if ctx.Err() != nil {
			return runner.Cancelled(ctx), aborted
		}
		return runner.Result{}, gone
	}
	defer call.Close()
	interval := c.registry.interval(wid)
	idle := MissedHeartbeats * interval
	incarnation := c.registry.incarnation(wid)
	// Only the placement's own messages prove the thread alive: silence is
	// measured from the last of them, whatever else arrives. A silent
	// placement on a worker whose own heartbeats keep coming (same
	// incarnation) is given SilencePatience before it is presumed lost: a
	// worker hosting thousands of threads on a busy machine sends their
	// progress late, and is not lost.
	heard := time.Now()
	patient := false
	for {
		wait := idle - time.Since(heard)
		if patient {
			wait = interval
		}
		reply, err := call.Next(ctx, max(time.Millisecond, wait))
		patient = errors.Is(err, actor.ErrSilent) && ctx.Err() == nil && time.Since(heard) < SilencePatience &&
			c.registry.alive(wid, incarnation, MissedHeartbeats)
		if patient {
			continue
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			res, answered := c.cancelOn(call, wid, tok, t, idle, context.Cause(ctx))
			if answered {
				return res, ended // the worker has ended the thread
			}
			return res, aborted
		case errors.Is(err, actor.ErrNoResponders):
			return runner.Result{}, gone
		case errors.Is(err, actor.ErrSilent):
			if v, lapsed := r.lapse(t, idle, time.Now()); !lapsed {
				heard = v
				continue
			}
			return runner.Result{}, lost
		default:
			return runner.Failed(fmt.Sprintf("worker %s: %v", wid, err)), aborted
		}
		switch wire.Type(reply.Type) {
		case wire.TypeExecAccepted:
			heard = time.Now()
			c.recordStarted(r, t, wid)
		case wire.TypeProgress:
			if c.progressOf(reply, t, wid, tok) {
				heard = time.Now()
			}
		case wire.TypeExecBusy:
			return runner.Result{}, busy
		case wire.TypeExecResult:
			if res, out, ok := c.execResult(reply, t, wid, tok); ok {
				return res, out
			}
		default:
			if err := actor.MsgError(reply); err != nil {
				return runner.Failed(fmt.Sprintf("worker %s: %v", wid, err)), aborted
			}
		}
	}
}

// execRequest is the message placing t on a worker.
//
//go:noinline
func (c *Coordinator) execRequest(t *threadRec, attempt int, tok string) actor.Msg {
	th := t.thread
	th.Replay = t.replay
	req := wire.ExecRequest{Thread: th, Coordinator: c.cfg.ID, Epoch: c.epoch, Attempt: attempt,
		Token: tok, Uptime: c.uptime(), Grant: t.lease.Renew(0, 0)}
	m := wire.WithIDs(wire.Message(wire.TypeExecRequest, req), t.thread.RunID, t.thread.ID)
	for k, v := range t.trace {
		m.Header[k] = v
	}
	return m
}

// progressOf says whether a progress message carries the placement's
// token, and publishes the thread's events it carries if so.
//
//go:noinline
func (c *Coordinator) progressOf(reply actor.Msg, t *threadRec, wid, tok string) bool {
	var p wire.Progress
	if wire.DecodeAs(reply.Data, wire.TypeProgress, &p) != nil || p.Token != tok {
		return false
	}
	c.relay(t, p.Events, wire.SubjectExec(wid)+" reply")
	return true
}

// recordStarted records that t started on worker wid.
//
//go:noinline
func (c *Coordinator) recordStarted(r *run, t *threadRec, wid string) {
	e := threadEvent(event.ThreadStarted, t.thread)
	e.Worker, e.Time = wid, c.cfg.Now()
	first := r.markStarted(t, e.Time)
	r.rec.Emit(e)
	c.publish(e) // the only thread.started: the worker reports none
	c.cfg.Metrics.Placement(metrics.OutcomePlaced)
	if first && !t.admitted.IsZero() {
		c.cfg.Metrics.SpawnStarted(time.Since(t.admitted))
	}
}

// execResult decodes a worker's final answer; ok is false for a result
// without the placement's token, which is ignored.
//
//go:noinline
func (c *Coordinator) execResult(reply actor.Msg, t *threadRec, wid, tok string) (_ runner.Result, _ outcome, ok bool) {
	var er wire.ExecResult
	if err := wire.DecodeAs(reply.Data, wire.TypeExecResult, &er); err != nil {
		return runner.Failed(fmt.Sprintf("worker %s sent a bad result: %v", wid, err)), aborted, true
	}
	if er.Token != tok || er.Worker != wid {
		c.refuse(wire.SubjectExec(wid)+" reply", fmt.Errorf("result for thread %s without its placement's token", er.ThreadID))
		return runner.Result{}, 0, false
	}
	c.relay(t, er.Events, wire.SubjectExec(wid)+" reply")
	return er.Result, ended, true
}

// cancelOn tells the worker to cancel the thread and waits, bounded, for the
// final result it then sends; answered says whether it came.
func (c *Coordinator) cancelOn(call actor.Call, wid, tok string, t *threadRec, idle time.Duration, cause error) (res runner.Result, answered bool) {
	reason := "cancelled"
	if cause != nil && !errors.Is(cause, context.Canceled) {
		reason = cause.Error()
	}
	cancel := wire.Cancel{RunID: t.thread.RunID, ThreadIDs: []string{t.thread.ID}, Reason: reason}
	c.tr.Publish(context.Background(), wire.SubjectCancel(wid), wire.Message(wire.TypeCancel, cancel))
	ctx, stop := context.WithTimeout(context.Background(), idle)
	defer stop()
	for {
		reply, err := call.Next(ctx, idle)
		if err != nil {
			return runner.Result{Status: event.Cancelled, Error: reason}, false
		}
		if wire.Type(reply.Type) == wire.TypeProgress {
			c.progressOf(reply, t, wid, tok)
			continue
		}
		if wire.Type(reply.Type) == wire.TypeExecResult {
			var er wire.ExecResult
			if wire.DecodeAs(reply.Data, wire.TypeExecResult, &er) == nil && er.Token == tok {
				c.relay(t, er.Events, wire.SubjectExec(wid)+" reply")
				return er.Result, true
			}
		}
	}
}
