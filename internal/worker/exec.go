package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/actor"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/wire"
)

// hosted is one thread on this worker.
type hosted struct {
	pid    actor.PID
	thread runner.Thread
	coord  string
	// epoch, attempt and token are the placement's (ExecRequest); fenced
	// is set once it is known to be superseded or its lease lapsed.
	epoch   string
	attempt int
	token   string
	fenced  bool
	cancel  context.CancelCauseFunc // ends the thread's context at once
	// spawning counts the thread's spawns in flight; hasSlot says whether it
	// holds an execution slot (not while it waits on helpers).
	spawning int
	hasSlot  bool
}

// Control messages of a thread actor.
type (
	progressTick struct{}
	cancelThread struct{ cause error }
	threadDone   struct{ res runner.Result }
)

// threadActor serialises everything said about one thread to its coordinator:
// progress while it runs, then exactly one final result.
type threadActor struct {
	w      *Worker
	th     runner.Thread
	token  string
	reply  actor.Replier
	cancel context.CancelCauseFunc
	ctx    context.Context
	done   bool
	// attempt is the placement's number, for the thread's span.
	attempt int
}

func (a *threadActor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		go a.run(c.Self())
	case progressTick:
		if !a.done {
			a.reply.Reply(wire.Message(wire.TypeProgress, wire.Progress{ThreadID: a.th.ID, Token: a.token}))
		}
	case cancelThread:
		a.cancel(m.cause)
	case threadDone:
		a.done = true
		a.w.replyResult(a.reply, a.th.ID, a.token, m.res)
		c.Engine().Stop(c.Self())
	case actor.Stopped:
		a.cancel(errors.New("thread actor stopped"))
	}
}

// run executes the agent loop holding the slot taken at admission, and
// reports the end to the actor.
func (a *threadActor) run(self actor.PID) {
	provider, name := modelOf(a.th.Agent.Model)
	ctx, span := tracing.StartInvokeAgent(a.ctx, tracing.Agent{Name: a.th.Name, ThreadID: a.th.ID, RunID: a.th.RunID,
		Path: a.th.Path, Worker: a.w.cfg.ID, Provider: provider, Model: name, Depth: a.th.Depth, Attempt: a.attempt})
	log := a.w.cfg.Logger
	if log.Enabled(ctx, slog.LevelDebug) {
		log.DebugContext(ctx, "thread started", "run_id", a.th.RunID, "thread_id", a.th.ID, "name", a.th.Name,
			"depth", a.th.Depth, "attempt", a.attempt)
	}
	res := a.w.runner.RunThread(ctx, a.th)
	if log.Enabled(ctx, slog.LevelInfo) {
		log.LogAttrs(ctx, slog.LevelInfo, "thread finished", slog.String("run_id", a.th.RunID), slog.String("thread_id", a.th.ID),
			slog.String("name", a.th.Name), slog.String("status", string(res.Status)),
			slog.Int64("input_tokens", res.Own.InputTokens), slog.Int64("output_tokens", res.Own.OutputTokens))
	}
	tracing.EndInvokeAgent(span, res.Own.InputTokens, res.Own.OutputTokens, string(res.Status), res.Error)
	a.w.finish(a.th.ID)
	a.cancel(nil)
	if err := a.w.engine.Send(self, threadDone{res: res}); err != nil {
		// The actor is gone (engine stopping): answer directly.
		a.w.replyResult(a.reply, a.th.ID, a.token, res)
	}
}

// modelOf splits a model reference for the span: "openai:gpt-4o" is
// provider openai, model gpt-4o; "sim" is both.
func modelOf(ref string) (provider, name string) {
	if ref == "" {
		return "", ""
	}
	if r, err := model.ParseRef(ref); err == nil {
		if r.Name == "" {
			return r.Provider, r.Provider
		}
		return r.Provider, r.Name
	}
	return "", ref
}

// replyResult sends a thread's result; one that cannot be sent (too large
// for the connection and no store to offload it to) becomes a failure that
// says so, rather than silence that would be taken for a lost worker.
func (w *Worker) replyResult(r actor.Replier, id, token string, res runner.Result) {
	m := wire.Message(wire.TypeExecResult, wire.ExecResult{ThreadID: id, Worker: w.cfg.ID, Token: token, Result: res})
	if !w.tr.Inline(len(m.Data)) {
		// A result over the NATS max payload is uploaded before it is sent,
		// which may outlast the coordinator's patience: progress goes on
		// meanwhile.
		defer w.keepAlive(r, id, token)()
	}
	err := r.Reply(m)
	if err == nil {
		return
	}
	w.cfg.Logger.Warn("send result", "thread_id", id, "err", err)
	failed := runner.Result{Status: event.Failed, Error: "the result could not be sent: " + err.Error(), Usage: res.Usage}
	r.Reply(wire.Message(wire.TypeExecResult, wire.ExecResult{ThreadID: id, Worker: w.cfg.ID, Token: token, Result: failed}))
}

// keepAlive sends progress of thread id on r every heartbeat until the
// returned stop is called.
func (w *Worker) keepAlive(r actor.Replier, id, token string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(w.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.Reply(wire.Message(wire.TypeProgress, wire.Progress{ThreadID: id, Token: token}))
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// handleExec takes a placed thread if a slot is free, else answers busy.
func (w *Worker) handleExec(_ context.Context, m actor.Msg, r actor.Replier) {
	var req wire.ExecRequest
	if err := wire.DecodeAs(m.Data, wire.TypeExecRequest, &req); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	if w.draining.Load() {
		r.Reply(wire.Message(wire.TypeExecBusy, wire.ExecBusy{Worker: w.cfg.ID, Draining: true}))
		return
	}
	select {
	case w.slots <- struct{}{}:
	default:
		r.Reply(wire.Message(wire.TypeExecBusy, wire.ExecBusy{Worker: w.cfg.ID}))
		return
	}
	th := req.Thread
	// The trace goes on from the parent's execute_tool agent span (or the
	// run's submission), whichever process that was in.
	base := tracing.Extract(context.Background(), m.Header)
	if m := w.meter(&req); m != nil {
		base = runner.WithMeter(base, m)
	}
	ctx, cancel := context.WithCancelCause(base)
	a := &threadActor{w: w, th: th, token: req.Token, reply: r, cancel: cancel, ctx: ctx, attempt: req.Attempt}
	h := &hosted{thread: th, coord: req.Coordinator, epoch: req.Epoch, attempt: req.Attempt, token: req.Token, cancel: cancel, hasSlot: true}

	w.mu.Lock()
	if _, dup := w.threads[th.ID]; dup {
		// An earlier placement of the thread still runs here: its coordinator
		// gave up on it (this worker seemed lost). Busy sends the new
		// placement elsewhere instead of failing the thread.
		w.mu.Unlock()
		<-w.slots
		cancel(nil)
		r.Reply(wire.Message(wire.TypeExecBusy, wire.ExecBusy{Worker: w.cfg.ID}))
		return
	}
	w.threads[th.ID] = h
	// A placement is a sign of life: a coordinator restarted under the same
	// id places threads before its first heartbeat reaches this worker.
	c := w.coords[req.Coordinator]
	if c == nil {
		c = &coordSeen{}
		w.coords[req.Coordinator] = c
	}
	c.see(req.Epoch, req.Uptime, 0, time.Now())
	w.mu.Unlock()

	r.Reply(wire.Message(wire.TypeExecAccepted, wire.ExecAccepted{Worker: w.cfg.ID}))
	pid, err := w.engine.Spawn(th.ID, a)
	if errors.Is(err, actor.ErrExists) {
		// The actor of an earlier placement of the thread is still
		// stopping here: place it elsewhere, as for a thread still hosted.
		w.finish(th.ID)
		cancel(err)
		r.Reply(wire.Message(wire.TypeExecBusy, wire.ExecBusy{Worker: w.cfg.ID}))
		return
	}
	if err != nil {
		w.finish(th.ID)
		cancel(err)
		r.Reply(wire.Message(wire.TypeExecResult, wire.ExecResult{ThreadID: th.ID, Worker: w.cfg.ID, Token: req.Token,
			Result: runner.Result{Status: event.Failed, Error: "worker could not host the thread: " + err.Error()}}))
		return
	}
	w.mu.Lock()
	h.pid = pid
	w.mu.Unlock()
}

// finish forgets a thread and frees its slot if it holds one.
func (w *Worker) finish(id string) {
	w.mu.Lock()
	h, ok := w.threads[id]
	if ok {
		delete(w.threads, id)
		if h.hasSlot {
			h.hasSlot = false
			<-w.slots
		}
	}
	w.mu.Unlock()
}

// handleCancel cancels the named threads; unknown ids are ignored, since the
// thread may have just ended.
func (w *Worker) handleCancel(_ context.Context, m actor.Msg, r actor.Replier) {
	var c wire.Cancel
	if err := wire.DecodeAs(m.Data, wire.TypeCancel, &c); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	cause := errors.New(c.Reason)
	if c.Reason == "" {
		cause = errors.New("cancelled by the coordinator")
	}
	w.mu.Lock()
	var pids []actor.PID
	for _, id := range c.ThreadIDs {
		if h, ok := w.threads[id]; ok && !h.pid.IsZero() {
			pids = append(pids, h.pid)
		}
	}
	w.mu.Unlock()
	for _, pid := range pids {
		w.engine.Send(pid, cancelThread{cause: cause})
	}
	r.Reply(wire.Message(wire.TypeOK, struct{}{}))
}
