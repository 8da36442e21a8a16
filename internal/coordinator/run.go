package coordinator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/wire"
)

// run is one run this coordinator owns: its ledger, its thread tree and its
// record. Everything about a run lives in this coordinator's memory.
type run struct {
	id       string
	ledger   *limits.Ledger
	budget   *limits.Tree
	timeout  time.Duration // the run's deadline after it starts; 0: none
	approver string
	// webhooks are the URLs its submission asked to be called (besides
	// the coordinator's own).
	webhooks []string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	rec      *record.Recorder
	// active is when the coordinator last recorded something of the run
	// (its threads' own reports are on theirs): see slots.go.
	active activity
	// trace is the submission's trace headers: the root thread's spans
	// nest under the span that submitted the run.
	trace map[string]string
	// journal writes the coordinator's journal entries of the run; nil
	// without a store.
	journal *store.RunJournal
	// lease is this coordinator's hold on a queued run; nil for a run
	// submitted directly.
	lease atomic.Pointer[runLease]

	// admitting makes a spawn's check for its helper and the helper's
	// registration one step: a spawn request sent twice (again after its
	// sender's connection moved) makes one helper.
	admitting sync.Mutex

	mu      sync.Mutex
	threads map[string]*threadRec
	// journals are the trusted journal entries of each thread, read when
	// the run is executed again; nil on a first execution.
	journals map[string][]journal.Entry
	// charged are the reused helpers whose work counts in the budget.
	charged map[string]bool
	// decisions are the approvals asked in this execution, by thread and
	// call (decisionOf).
	decisions map[string]*decision
}

// decision is one tool call's approval: a, once done is closed.
type decision struct {
	done chan struct{}
	a    policy.Approval
}

// decisionOf is the approval of thread's call; first says the caller is
// the first to ask for it, and must decide it and close done.
func (r *run) decisionOf(thread, call string) (d *decision, first bool) {
	key := thread + "\x00" + call
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.decisions[key]; d != nil {
		return d, false
	}
	d = &decision{done: make(chan struct{})}
	r.decisions[key] = d
	return d, true
}

// threadRec is one thread of a run's tree as the coordinator sees it.
type threadRec struct {
	thread thread.Thread
	ctx    context.Context
	cancel context.CancelCauseFunc
	// lease is the thread's share of its budgets; lease.Node() is the
	// budget node its helpers are counted in.
	lease *limits.Lease

	// Guarded by run.mu.
	worker   string
	token    string // the current placement's; "" between placements
	abort    context.CancelCauseFunc
	spawning int
	parkedOn string // the worker whose slot the parked thread gave back
	done     bool
	started  time.Time // when a worker first took the thread
	// cut ends the subtree when the duration budget of the thread's own
	// node runs out (the run's, for the root); nil without one.
	cut *time.Timer
	// vouched is when a placement check last confirmed the current
	// placement to its worker: its silence counts from then at the latest.
	vouched time.Time

	active   activity          // when its placement last reported events (slots.go)
	trace    map[string]string // trace headers its placements carry (traceparent of the parent's tool call)
	admitted time.Time         // when its spawn came in (helpers), for metrics
	result   thread.Result     // set once done

	// ended is closed once the thread is done: a parent placed again that
	// asks for the same helper waits for this one instead of starting another.
	ended chan struct{}

	// replay is what the current placement reuses; owned by the step
	// placing the thread (execution).
	replay []journal.Entry
	// setup is the thread's setup as it travels
	// (wire.EncodeSetup), set before its first placement; childSetup,
	// guarded by run.mu, is the one its helpers made without a handoff share.
	setup, childSetup *threadSetup
}

// threadSetup is an encoded setup and its hash.
type threadSetup struct {
	hash string
	body []byte
}

func newThreadSetup(th *thread.Thread) *threadSetup {
	hash, body := wire.EncodeSetup(th)
	return &threadSetup{hash: hash, body: body}
}

// helperSetup is the setup of helper th of parent, made after the
// handoffs: encoded once per parent when there are none, since such siblings
// differ only in their names, which the setup leaves out.
func (r *run) helperSetup(parent *threadRec, th *thread.Thread, handoffs []string) *threadSetup {
	if len(handoffs) > 0 {
		return newThreadSetup(th)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if parent.childSetup == nil {
		parent.childSetup = newThreadSetup(th)
	}
	return parent.childSetup
}

func newRun(id string, ledger *limits.Ledger, budget *limits.Tree, approver string) *run {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &run{id: id, ledger: ledger, budget: budget, approver: approver, ctx: ctx, cancel: cancel,
		rec: record.NewRecorder(nil), threads: map[string]*threadRec{}, charged: map[string]bool{},
		decisions: map[string]*decision{}}
}

// add registers t, whose thread is set; its context derives from its
// parent's, so cancelling a parent, or its end, reaches the subtree. Losing
// the parent's worker does not: the parent is placed again and its helpers,
// which go on running, deliver their results to it. The thread is made in
// its record by the caller, not copied into it: it is 712 bytes.
func (r *run) add(t *threadRec, parent *threadRec, node *limits.Node) *threadRec {
	base := r.ctx
	r.mu.Lock()
	defer r.mu.Unlock()
	if parent != nil {
		base = parent.ctx
	}
	t.ctx, t.cancel = context.WithCancelCause(base)
	t.lease, t.ended = node.Lease(), make(chan struct{})
	r.threads[t.thread.ID] = t
	return t
}

func (r *run) thread(id string) *threadRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.threads[id]
}

// startAttempt gives a thread a fresh attempt context, returning it.
func (r *run) startAttempt(t *threadRec) context.Context {
	ctx, cancel := context.WithCancelCause(t.ctx)
	r.mu.Lock()
	t.abort = cancel
	r.mu.Unlock()
	return ctx
}

// endAttempt cancels an attempt's context: the placement's request ends.
func (r *run) endAttempt(t *threadRec, cause error) {
	r.mu.Lock()
	abort := t.abort
	r.mu.Unlock()
	if abort != nil {
		abort(cause)
	}
}

// onWorker reports whether an unfinished thread of the run is placed on worker.
func (r *run) onWorker(worker string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.threads {
		if !t.done && t.worker == worker {
			return true
		}
	}
	return false
}

// parkParent counts a spawn of parent and, for its first outstanding spawn,
// returns the worker whose slot it gives back ("" when none).
func (r *run) parkParent(parent *threadRec) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parent.spawning++
	if parent.spawning == 1 {
		parent.parkedOn = parent.worker
		return parent.parkedOn
	}
	return ""
}

// unparkParent ends a spawn of parent and, when it was the last, returns the
// worker to take the slot back on: the same one parking gave it back on.
func (r *run) unparkParent(parent *threadRec) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parent.spawning--
	if parent.spawning > 0 {
		return ""
	}
	w := parent.parkedOn
	parent.parkedOn = ""
	if parent.done || parent.worker != w {
		return "" // the parent ended or moved; its old reservation is gone
	}
	return w
}

// finish marks a thread ended at time at, cancels its context (its helpers
// are over) and returns its thread.finished event for the coordinator to
// publish: the only one the thread gets, whichever way it ended (a worker
// that was presumed lost and answers late publishes none). Its usage is the
// thread's own, like every thread row; the run's total is on run.finished.
func (r *run) finish(t *threadRec, res thread.Result, at time.Time) event.Event {
	r.mu.Lock()
	t.done, t.result = true, res
	started := t.started
	if t.cut != nil {
		t.cut.Stop()
	}
	r.mu.Unlock()
	t.cancel(nil)
	t.lease.Close(limits.SpendOf(res.Own))
	e := threadEvent(event.ThreadFinished, &t.thread)
	e.Status, e.Reason, e.Usage, e.Time = res.Status, res.Error, res.Own, at
	if !started.IsZero() {
		e.Latency = event.Duration(at.Sub(started))
	}
	r.rec.Emit(e)
	r.rec.ThreadUsage(t.thread.ID, res.Own)
	r.active.touch()
	close(t.ended) // last: whoever waits on it finds the thread recorded
	return e
}

// watchDuration cuts t's subtree short when the duration budget of node,
// t's own, runs out: at that moment, not only at the next model call or
// spawn, whatever its threads are doing then (a model call, a tool call,
// waiting on helpers). The budget is marked spent and cancel (the run's,
// for its root; t's own, for a helper) gets it as the cause, so every
// thread of the subtree is cancelled on its worker at once and ends failed
// with the budget's reason (endedAs). Nothing is watched without a
// duration budget.
func (r *run) watchDuration(t *threadRec, node *limits.Node, now time.Time, cancel context.CancelCauseFunc) {
	ends := node.Ends()
	if ends.IsZero() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.cut = time.AfterFunc(ends.Sub(now), func() {
		r.mu.Lock()
		done := t.done
		r.mu.Unlock()
		if done {
			return
		}
		if e := node.Expire(); e != nil {
			cancel(e)
		}
	})
}

// endedAs is the result t ends with, given the one its placement ended
// with:
//   - a thread cancelled because a budget ran out (a duration budget's
//     watch cancelled its subtree) failed with that budget's reason,
//     "budget exhausted (duration)", as one whose next model call is
//     refused does;
//   - a thread cancelled at a request, its own or its run's, is cancelled
//     whatever its worker answered: the request was answered "cancelling",
//     and the cancel may reach the worker after the thread's end (a denied
//     approval lets it answer once more), keeping its output;
//   - every other result is itself.
func endedAs(t *threadRec, res thread.Result) thread.Result {
	var spent *limits.Exhausted
	var asked *cancelAsked
	cause := context.Cause(t.ctx)
	switch {
	case res.Status == event.Cancelled && errors.As(cause, &spent):
		res.Status, res.Error = event.Failed, spent.Error()
	case res.Status != event.Cancelled && errors.As(cause, &asked):
		res.Status, res.Error = event.Cancelled, asked.reason
	}
	return res
}

// markStarted notes when a worker first took t; first reports whether
// this was that time.
func (r *run) markStarted(t *threadRec, at time.Time) (first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !t.started.IsZero() {
		return false
	}
	t.started = at
	return true
}

// settleTimeout bounds how long a run's end waits for its last threads.
const settleTimeout = 10 * time.Second

// settle waits, at most timeout, until every thread of the run has finished.
func (r *run) settle(timeout time.Duration) {
	expired := time.After(timeout)
	for _, ended := range r.ends() {
		select {
		case <-ended:
		case <-expired:
			return
		}
	}
}

// ends are the ended signals of the run's threads (closed for those
// finished and recorded).
func (r *run) ends() []<-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]<-chan struct{}, 0, len(r.threads))
	for _, t := range r.threads {
		out = append(out, t.ended)
	}
	return out
}

func threadEvent(typ event.Type, th *thread.Thread) event.Event {
	return event.Event{Type: typ, RunID: th.RunID, ThreadID: th.ID, ParentID: th.ParentID, Depth: th.Depth, Name: th.Name}
}
