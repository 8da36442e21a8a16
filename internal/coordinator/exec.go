package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
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

// A thread being executed is held as data, not by a goroutine waiting for
// it: an execution records where the thread is placed and how its
// placements went; the registry's queue holds it while no worker has room
// (reserve), and each placement is a long request (transport.Long). A
// goroutine runs only for a step (placing, and what follows the end of a
// placement, which may block) and ends with it, so a live or queued helper
// costs this coordinator its records, not a stack.
type execution struct {
	c *Coordinator
	r *run
	t *threadRec
	// done takes the final result, on a goroutine that may block; reported
	// says whether a worker ran the thread to its end (and journaled it),
	// so the coordinator journals the end otherwise.
	done func(res thread.Result, reported bool)

	// Owned by the step in progress: there is one at a time.
	attempts, placements int
	reread               bool      // an earlier placement may have journaled more
	waitFrom             time.Time // when the placement in progress began to look for a slot
}

// execThread places a thread and waits for its end (a run's root, whose
// run goroutine waits anyway; helpers go through startThread).
func (c *Coordinator) execThread(r *run, t *threadRec) (res thread.Result, reported bool) {
	ended := make(chan struct{})
	c.startThread(r, t, func(rs thread.Result, rp bool) {
		res, reported = rs, rp
		close(ended)
	})
	<-ended
	return res, reported
}

// startThread places thread t, placing it again when its worker is lost
// (up to MaxAttempts), and gives done its final result. It returns once the
// first placement's request is sent, which may mean waiting in the queue
// for a slot. Its thread.finished is always the coordinator's (run.finish).
func (c *Coordinator) startThread(r *run, t *threadRec, done func(res thread.Result, reported bool)) {
	(&execution{c: c, r: r, t: t, done: done}).place()
}

// place places the thread on a worker and sends its request; when no
// worker has room, the thread waits in the registry's queue, as data, and
// placed goes on once a slot is handed to it.
func (e *execution) place() {
	c, t := e.c, e.t
	if err := t.ctx.Err(); err != nil {
		e.done(thread.Cancelled(t.ctx), false)
		return
	}
	e.waitFrom = time.Now()
	if wid := c.registry.reserve(t.ctx, c.cfg.PlacementTimeout, t.thread.Agent.Harness.MCP, e); wid != "" {
		e.placed(wid, nil)
	}
}

// waiting tells the run's watchers that the thread waits for a worker
// slot, and whether any worker is registered at all.
func (e *execution) waiting(workers int) {
	ev := threadEvent(event.ThreadWaiting, &e.t.thread)
	ev.Reason = event.WaitingForWorker
	if workers == 0 {
		ev.Reason += " (none is registered)"
	}
	e.c.emit(e.r, ev)
}

// placed sends the thread's request to worker wid, reserved for it; err
// says why no worker was.
func (e *execution) placed(wid string, err error) {
	c, r, t := e.c, e.r, e.t
	c.cfg.Metrics.PlacementWaited(time.Since(e.waitFrom))
	if err != nil {
		if t.ctx.Err() != nil {
			e.done(thread.Cancelled(t.ctx), false)
			return
		}
		c.cfg.Metrics.Placement(metrics.OutcomeTimeout)
		c.cfg.Logger.Warn("placement timed out", "run_id", t.thread.RunID, "thread_id", t.thread.ID, "name", t.thread.Name, "err", err)
		e.done(thread.Failed(fmt.Sprintf("no worker available: %v", err)), false)
		return
	}
	if !r.acting() {
		// The run is no longer held here: nothing more is placed for it.
		c.registry.release(wid)
		e.done(thread.Cancelled(t.ctx), false)
		return
	}
	ctx := r.startAttempt(t)
	e.placements++
	// Placed before the request is sent: the worker may spawn at once.
	tok := r.place(t, wid)
	t.replay = c.replayOf(r, t, e.reread)
	if t.setup == nil {
		t.setup = newThreadSetup(&t.thread)
	}
	p := &placement{e: e, wid: wid, tok: tok, proof: c.placementProof(r, t, wid, e.placements, tok),
		attempt: e.placements, ctx: ctx, replays: c.accountReplay(r, t)}
	p.start()
}

// ended is what follows the end of placement p: the thread's end, or its
// next placement.
func (e *execution) ended(p *placement, res thread.Result, out outcome) {
	c, r, t, wid := e.c, e.r, e.t, p.wid
	if p.replays && out != busy {
		c.cfg.Metrics.JournalReplayed()
	}
	r.unplace(t)
	c.registry.release(wid)
	switch out {
	case ended, aborted:
		r.endAttempt(t, nil)
		e.done(res, out == ended)
		return
	case busy:
		c.cfg.Metrics.Placement(metrics.OutcomeBusy)
		r.endAttempt(t, nil)
		c.registry.busy(wid)
	case gone:
		c.cfg.Metrics.Placement(metrics.OutcomeNoResponders)
		c.fence(wid, t.thread.ID, p.attempt)
		e.reread = true
		r.endAttempt(t, errors.New("worker gone"))
		if c.registry.forget(wid) {
			c.workerGone(wid, "no responders", true)
		}
		c.replaced(t, wid, "worker "+wid+" not answering")
	case lost:
		c.cfg.Metrics.Placement(metrics.OutcomeLost)
		e.attempts++
		c.fence(wid, t.thread.ID, p.attempt)
		e.reread = true
		r.endAttempt(t, fmt.Errorf("worker %s lost", wid))
		if c.registry.forget(wid) {
			c.workerGone(wid, "silent during a thread", true)
		}
		if e.attempts >= c.cfg.MaxAttempts {
			e.done(thread.Failed("worker lost"), false)
			return
		}
		c.cfg.Logger.Warn("placing thread again", "run_id", t.thread.RunID, "thread_id", t.thread.ID, "name", t.thread.Name, "attempt", e.attempts+1)
		c.replaced(t, wid, "worker "+wid+" lost")
	}
	e.place()
}

// replaced publishes that t is being placed again, away from worker wid.
func (c *Coordinator) replaced(t *threadRec, wid, reason string) {
	e := threadEvent(event.ThreadReplaced, &t.thread)
	e.Worker, e.Reason = wid, reason
	c.publish(e)
}

// placement is one attempt of a thread on worker wid, until its outcome:
// a long request (transport.Long) whose keep-alives are the thread's
// progress, carrying its events, and whose answer is its result.
type placement struct {
	e        *execution
	wid, tok string
	proof    string // for the thread's journal (placementProof)
	attempt  int
	ctx      context.Context // the attempt's: cancelled, the worker is told to cancel
	replays  bool            // it reuses journaled work
	// withSetup: the request carries the thread's setup, not only its hash.
	withSetup   bool
	interval    time.Duration
	incarnation time.Time
	long        transport.Long

	// Set by the replies, one at a time, before the request's end.
	res thread.Result
	out outcome
}

// start sends the placement's request. Only the placement's own messages
// prove the thread alive: silence is measured from the last of them,
// whatever else arrives. A cancelled attempt tells the worker, which
// answers with the thread's end; it is awaited for a loss window, then
// the thread counts as cancelled.
func (p *placement) start() {
	c, t := p.e.c, p.e.t
	held, interval, incarnation := c.registry.placing(p.wid, t.setup.hash)
	p.withSetup, p.interval, p.incarnation = !held, interval, incarnation
	idle := MissedHeartbeats * p.interval
	p.long = transport.Long{
		Subject:  wire.SubjectExec(p.wid),
		Request:  func() wire.Msg { return c.execRequest(t, p.attempt, p.tok, p.proof, p.withSetup) },
		Reply:    p.reply,
		End:      p.end,
		Idle:     func() time.Duration { return idle },
		Tolerate: p.tolerate,
		Cancel:   p.cancel,
		Grace:    idle,
	}
	p.long.Start(p.ctx, c.execTr)
}

// reply judges one of the worker's replies.
func (p *placement) reply(m wire.Msg) transport.Verdict {
	e := p.e
	c := e.c
	switch wire.Type(m.Type) {
	case wire.TypeExecAccepted:
		if p.withSetup {
			c.registry.heldSetup(p.wid, e.t.setup.hash, true)
		}
		c.recordStarted(e.r, e.t, p.wid)
		return transport.Alive
	case wire.TypeExecSetupMissing:
		// The worker holds no setup of the request's hash (restarted, or it
		// let the setup go): the request goes again, once, with the setup.
		if p.withSetup {
			p.res, p.out = thread.Failed(fmt.Sprintf("worker %s did not take the thread's setup", p.wid)), aborted
			return transport.Final
		}
		c.registry.heldSetup(p.wid, e.t.setup.hash, false)
		p.withSetup = true
		return transport.Again
	case wire.TypeProgress:
		if c.progressOf(m, e.r, e.t, p.wid, p.tok) {
			return transport.Alive
		}
		return transport.Ignore
	case wire.TypeExecBusy:
		p.out = busy
		return transport.Final
	case wire.TypeExecResult:
		res, out, ok := c.execResult(m, e.r, e.t, p.wid, p.tok)
		if !ok {
			return transport.Ignore
		}
		p.res, p.out = res, out
		return transport.Final
	}
	if err := wire.MsgError(m); err != nil {
		p.res, p.out = thread.Failed(fmt.Sprintf("worker %s: %v", p.wid, err)), aborted
		return transport.Final
	}
	return transport.Ignore
}

// end takes the placement's outcome.
func (p *placement) end(err error) {
	switch {
	case err == nil:
	case errors.Is(err, transport.ErrCancelled):
		p.res, p.out = thread.Result{Status: event.Cancelled, Error: cancelReason(context.Cause(p.ctx))}, aborted
	case errors.Is(err, transport.ErrNoResponders):
		p.res, p.out = thread.Result{}, gone
	case errors.Is(err, transport.ErrSilent):
		p.res, p.out = thread.Result{}, lost
	default:
		p.res, p.out = thread.Failed(fmt.Sprintf("worker %s: %v", p.wid, err)), aborted
	}
	p.e.ended(p, p.res, p.out)
}

// tolerate bears a placement's silence while its worker's own heartbeats
// keep coming (same incarnation), up to SilencePatience: a worker hosting
// thousands of threads on a busy machine sends their progress late, and is
// not lost. Past that, a placement check that vouched for it within the
// loss window keeps it (run.lapse).
func (p *placement) tolerate(heard, now time.Time) time.Time {
	e := p.e
	idle := MissedHeartbeats * p.interval
	if now.Sub(heard) < SilencePatience && e.c.registry.alive(p.wid, p.incarnation, MissedHeartbeats) {
		return now.Add(p.interval)
	}
	if v, lapsed := e.r.lapse(e.t, idle, now); !lapsed {
		return v.Add(idle)
	}
	return time.Time{}
}

// cancel tells the worker to cancel the thread.
func (p *placement) cancel(cause error) {
	t := p.e.t
	cancel := wire.Cancel{RunID: t.thread.RunID, ThreadIDs: []string{t.thread.ID}, Reason: cancelReason(cause)}
	p.e.c.tr.Publish(context.Background(), wire.SubjectCancel(p.wid), wire.Message(wire.TypeCancel, cancel))
}

// cancelReason is what a cancel with cause is said to be: the cause's
// words, or "cancelled" for a plain cancel.
func cancelReason(cause error) string {
	if cause == nil || errors.Is(cause, context.Canceled) {
		return "cancelled"
	}
	return cause.Error()
}

// execRequest is the message placing t on a worker, with its setup or only
// the setup's hash.
func (c *Coordinator) execRequest(t *threadRec, attempt int, tok, proof string, withSetup bool) wire.Msg {
	req := wire.ExecRequest{Thread: t.thread, SetupHash: t.setup.hash, Coordinator: c.cfg.ID, Epoch: c.epoch, Attempt: attempt,
		Token: tok, Proof: proof, Uptime: c.uptime(), Grant: t.lease.Renew(limits.Spend{}, 0)}
	wire.StripSetup(&req.Thread)
	req.Thread.Replay = t.replay
	if withSetup {
		req.Setup = t.setup.body
	}
	m := wire.WithIDs(wire.Message(wire.TypeExecRequest, &req), t.thread.RunID, t.thread.ID)
	maps.Copy(m.Header, t.trace)
	return m
}

// progressOf says whether a progress message carries the placement's
// token, and publishes the thread's events it carries if so.
func (c *Coordinator) progressOf(reply wire.Msg, rn *run, t *threadRec, wid, tok string) bool {
	var p wire.Progress
	if wire.DecodeAs(reply.Data, wire.TypeProgress, &p) != nil || p.Token != tok {
		return false
	}
	c.relay(rn, t, p.Events, wire.SubjectExec(wid)+" reply")
	return true
}

// recordStarted records that t started on worker wid.
func (c *Coordinator) recordStarted(r *run, t *threadRec, wid string) {
	e := threadEvent(event.ThreadStarted, &t.thread)
	e.Worker, e.Time = wid, c.cfg.Now()
	first := r.markStarted(t, e.Time)
	c.emit(r, e) // the only thread.started: the worker reports none
	c.cfg.Metrics.Placement(metrics.OutcomePlaced)
	if first && !t.admitted.IsZero() {
		c.cfg.Metrics.SpawnStarted(time.Since(t.admitted))
	}
}

// execResult decodes a worker's final answer; ok is false for a result
// without the placement's token, which is ignored.
func (c *Coordinator) execResult(reply wire.Msg, rn *run, t *threadRec, wid, tok string) (_ thread.Result, _ outcome, ok bool) {
	var er wire.ExecResult
	if err := wire.DecodeAs(reply.Data, wire.TypeExecResult, &er); err != nil {
		return thread.Failed(fmt.Sprintf("worker %s sent a bad result: %v", wid, err)), aborted, true
	}
	if er.Token != tok || er.Worker != wid {
		c.refuse(wire.SubjectExec(wid)+" reply", fmt.Errorf("result for thread %s without its placement's token", er.ThreadID))
		return thread.Result{}, 0, false
	}
	c.relay(rn, t, er.Events, wire.SubjectExec(wid)+" reply")
	return er.Result, ended, true
}
