package worker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// hosted is one thread on this worker: its placement, the cancel function
// of its context (set before anyone can name the thread, so no cancel is
// ever lost) and the reply inbox of its placement.
type hosted struct {
	thread thread.Thread
	coord  string
	// epoch, attempt and token are the placement's (ExecRequest); fenced
	// is set once it is known to be superseded or its lease lapsed.
	epoch   string
	attempt int
	token   string
	proof   string // the placement's journal proof (ExecRequest.Proof)
	fenced  bool
	// current is when the placement was last known to be current: its
	// ExecRequest's send time, then the latest confirmed PlacementCheck's.
	current time.Time
	ctx     context.Context
	cancel  context.CancelCauseFunc // ends the thread's context at once
	// hasSlot says whether it holds an execution slot (not while it waits
	// on helpers).
	hasSlot bool
	// spawning counts the thread's spawns in flight, waiting on their
	// helpers (park).
	spawning int

	// reply is the placement's inbox. sendMu orders what goes there:
	// progress while the thread runs, then exactly one final result, never
	// progress after it (ended). It also guards the thread's outbox: the
	// events waiting for its next message to the coordinator (events.go).
	reply      transport.Replier
	sendMu     sync.Mutex
	ended      bool
	events     []event.Event
	eventBytes int
}

// run executes the agent loop holding the slot taken at admission, then
// frees the slot and sends the result.
func (w *Worker) run(ctx context.Context, h *hosted) {
	th := &h.thread
	provider, name := modelOf(th.Agent.Model)
	ctx, span := tracing.StartInvokeAgent(ctx, tracing.Agent{Name: th.Name, ThreadID: th.ID, RunID: th.RunID,
		Path: th.Path, Worker: w.cfg.ID, Provider: provider, Model: name, Depth: th.Depth, Attempt: h.attempt})
	if log := w.cfg.Logger; log.Enabled(ctx, slog.LevelDebug) {
		log.DebugContext(ctx, "thread started", "run_id", th.RunID, "thread_id", th.ID, "name", th.Name,
			"depth", th.Depth, "attempt", h.attempt)
	}
	// Its model calls share each endpoint's quota with the cluster, and
	// lend the thread's slot out while they wait for it.
	ctx = providers.WithGates(ctx, quotaGates{w})
	ctx = model.WithQuotaNotice(ctx, slotLender{w, th.ID})
	res := w.runner.RunThread(ctx, th)

	if log := w.cfg.Logger; log.Enabled(ctx, slog.LevelInfo) {
		log.LogAttrs(ctx, slog.LevelInfo, "thread finished", slog.String("run_id", th.RunID), slog.String("thread_id", th.ID),
			slog.String("name", th.Name), slog.String("status", string(res.Status)),
			slog.Int64("input_tokens", res.Own.InputTokens), slog.Int64("output_tokens", res.Own.OutputTokens))
	}
	tracing.EndInvokeAgent(span, res.Own.InputTokens, res.Own.OutputTokens, string(res.Status), res.Error)
	w.finish(th.ID)
	h.cancel(nil)
	w.replyResult(h.reply, th.ID, h.token, res, h.end())
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

// replyResult sends a thread's result with its last events; one that cannot
// be sent (too large for the connection and no store to offload it to)
// becomes a failure that says so, rather than silence that would be taken
// for a lost worker.
func (w *Worker) replyResult(r transport.Replier, id, token string, res thread.Result, events []event.Event) {
	m := wire.Message(wire.TypeExecResult, wire.ExecResult{ThreadID: id, Worker: w.cfg.ID, Token: token, Result: res, Events: events})
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
	failed := thread.Result{Status: event.Failed, Error: "the result could not be sent: " + err.Error(), Usage: res.Usage}
	r.Reply(wire.Message(wire.TypeExecResult, wire.ExecResult{ThreadID: id, Worker: w.cfg.ID, Token: token, Result: failed}))
}

// keepAlive sends progress of thread id on r every heartbeat until the
// returned stop is called.
func (w *Worker) keepAlive(r transport.Replier, id, token string) (stop func()) {
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
func (w *Worker) handleExec(_ context.Context, m wire.Msg, r transport.Replier) {
	var req wire.ExecRequest
	if err := wire.DecodeAs(m.Data, wire.TypeExecRequest, &req); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	if w.draining.Load() {
		r.Reply(wire.Message(wire.TypeExecBusy, wire.ExecBusy{Worker: w.cfg.ID, Draining: true}))
		return
	}
	if err := w.setups.complete(&req); err != nil {
		if errors.Is(err, errSetupMissing) {
			r.Reply(wire.Message(wire.TypeExecSetupMissing, wire.ExecSetupMissing{Worker: w.cfg.ID, SetupHash: req.SetupHash}))
			return
		}
		r.Reply(wire.ErrorReply(err))
		return
	}
	select {
	case w.slots <- struct{}{}:
	default:
		r.Reply(wire.Message(wire.TypeExecBusy, wire.ExecBusy{Worker: w.cfg.ID}))
		return
	}
	// The trace goes on from the parent's execute_tool agent span (or the
	// run's submission), whichever process that was in.
	base := tracing.Extract(context.Background(), m.Header)
	if m := w.meter(&req); m != nil {
		base = runner.WithMeter(base, m)
	}
	ctx, cancel := context.WithCancelCause(base)
	th := &req.Thread
	h := &hosted{thread: req.Thread, coord: req.Coordinator, epoch: req.Epoch, attempt: req.Attempt, token: req.Token,
		proof: req.Proof, ctx: ctx, cancel: cancel, hasSlot: true, reply: r}

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
	now := time.Now()
	w.noteAliveLocked(now)
	h.current = w.coordLocked(req.Coordinator).see(req.Epoch, req.Uptime, 0, now)
	w.mu.Unlock()

	r.Reply(w.accepted)
	// A cancel from now on, even before the thread's goroutine runs, finds
	// the thread's cancel function in w.threads.
	go w.run(ctx, h)
}

// freeSlotLocked gives back h's slot if it holds one; under w.mu.
func (w *Worker) freeSlotLocked(h *hosted) {
	if h.hasSlot {
		h.hasSlot = false
		<-w.slots
	}
}

// finish forgets a thread and frees its slot if it holds one.
func (w *Worker) finish(id string) {
	w.mu.Lock()
	h, ok := w.threads[id]
	if ok {
		delete(w.threads, id)
		if len(w.threads) == 0 && w.idle != nil {
			close(w.idle)
			w.idle = nil
		}
		w.freeSlotLocked(h)
	}
	w.mu.Unlock()
}

// handleCancel cancels the named threads; unknown ids are ignored, since the
// thread may have just ended.
func (w *Worker) handleCancel(_ context.Context, m wire.Msg, r transport.Replier) {
	var c wire.Cancel
	if err := wire.DecodeAs(m.Data, wire.TypeCancel, &c); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	cause := errors.New(cmp.Or(c.Reason, "cancelled by the coordinator"))
	w.mu.Lock()
	var cancels []context.CancelCauseFunc
	for _, id := range c.ThreadIDs {
		if h, ok := w.threads[id]; ok {
			cancels = append(cancels, h.cancel)
		}
	}
	w.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
	r.Reply(wire.Message(wire.TypeOK, struct{}{}))
}
