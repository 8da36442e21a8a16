package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

// The runner's tests run whole trees in this process: Run starts a root
// thread, and local admits its helpers against the run's limits and budget
// and runs them here, as a coordinator and its workers would across the
// cluster.

// errUnknownRun: a spawn names no run Run is running.
var errUnknownRun = errors.New("unknown run")

// newInProcess is New with helpers run in this process.
func newInProcess(cfg Config) (*Runner, error) {
	l := &local{}
	cfg.Spawner = l
	r, err := New(cfg)
	l.r = r
	return r, err
}

// local runs helpers in this process, admitted against the ledger of the
// run that Run registered, and derived from their parent thread as the
// coordinator derives them (thread.SetHelper).
type local struct {
	r       *Runner
	ledgers sync.Map // run id -> *limits.Ledger
	threads sync.Map // thread id -> *thread.Thread, while it runs
}

// RunRequest is one run of a root agent.
type RunRequest struct {
	// ID is the run id; empty makes one.
	ID   string
	Task string
	// Agent is the root agent; Agents are the handoff targets by name.
	Agent  spec.Agent
	Agents map[string]spec.Agent
	Limits limits.Config
	// Budget bounds the run's whole tree (zero: unbounded).
	Budget limits.Budget
	// Cwd is the base directory: the harness cwd when the spec names none, and
	// what a relative spec cwd is resolved against. Empty means ".".
	Cwd string
}

// RunResult is how a run ended.
type RunResult struct {
	RunID  string
	RootID string
	thread.Result
	Stats limits.Stats
	// Budget is the run budget's use per bounded kind.
	Budget limits.Use
}

// Run runs a root agent and its helpers in this process and returns when
// the root thread ends.
func (r *Runner) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	l := r.cfg.Spawner.(*local)
	if strings.TrimSpace(req.Task) == "" {
		return RunResult{}, fmt.Errorf("%w: empty task", ErrBadRequest)
	}
	ledger, err := limits.New(req.Limits)
	if err != nil {
		return RunResult{}, err
	}
	cwd, err := thread.ResolveCwd(req.Cwd, req.Agent.Harness.Cwd)
	if err != nil {
		return RunResult{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	runID := req.ID
	if runID == "" {
		runID = uuid.NewString()
	}
	if _, loaded := l.ledgers.LoadOrStore(runID, ledger); loaded {
		return RunResult{}, fmt.Errorf("%w: run %s is already running here", ErrBadRequest, runID)
	}
	defer l.ledgers.Delete(runID)

	root := thread.Thread{
		RunID:       runID,
		ID:          uuid.NewString(),
		Path:        "root",
		Name:        req.Agent.Name,
		Task:        req.Task,
		Agent:       req.Agent,
		Agents:      req.Agents,
		Cwd:         cwd,
		Permissions: policy.Permissions{req.Agent.Harness.Permissions},
	}
	r.emit(event.Event{Type: event.RunStarted, RunID: runID, ThreadID: root.ID, Name: root.Name})
	budget := limits.NewTree(req.Budget, r.cfg.Now)
	meter := r.newLocalMeter(budget.Root())
	l.threads.Store(root.ID, &root)
	res := r.runLocal(WithMeter(ctx, meter), &root)
	l.threads.Delete(root.ID)
	meter.lease.Close(limits.SpendOf(res.Own))
	if spent := budget.Root().Spent(); spent != nil {
		res.Status, res.Error = event.Failed, spent.Detail()
	}
	r.emit(event.Event{Type: event.RunFinished, RunID: runID, ThreadID: root.ID, Name: root.Name,
		Status: res.Status, Reason: res.Error, Usage: res.Usage})
	return RunResult{RunID: runID, RootID: root.ID, Result: res, Stats: ledger.Stats(), Budget: budget.Root().Use()}, nil
}

func (l *local) Spawn(ctx context.Context, req *SpawnRequest, call SpawnCall) {
	go func() { call.Ended(l.spawn(ctx, req, call)) }()
}

// spawn admits and runs req's helper in this process, and waits for it.
func (l *local) spawn(ctx context.Context, req *SpawnRequest, call SpawnCall) (res thread.Result, err error) {
	v, ok := l.ledgers.Load(req.RunID)
	if !ok {
		return thread.Result{}, fmt.Errorf("%w: %s", errUnknownRun, req.RunID)
	}
	ledger := v.(*limits.Ledger)
	parent, ok := l.threads.Load(req.ParentID)
	if !ok {
		return thread.Result{}, fmt.Errorf("%w: no thread %s in run %s", errUnknownRun, req.ParentID, req.RunID)
	}
	var th thread.Thread
	if err := thread.SetHelper(&th, parent.(*thread.Thread), req.Handoffs,
		journal.HelperID(req.RunID, req.ParentID, req.CallID, uuid.NewString), req.Name, req.Task); err != nil {
		return thread.Result{}, err
	}
	slot, err := ledger.Admit(th.Depth)
	if err != nil {
		e := th.Event(event.ThreadRefused)
		e.ThreadID = ""
		if ref, ok := err.(*limits.Refusal); ok {
			e.Reason = string(ref.Reason)
		}
		l.r.emit(e)
		return thread.Result{}, err
	}
	defer slot.Release()
	if pm, ok := meterFrom(ctx).(*localMeter); ok {
		pm.lease.Release(limits.SpendOf(req.ParentSpent))
		node := pm.lease.Node()
		if err := node.Spawn(); err != nil {
			ref := &limits.Refusal{Reason: limits.ReasonBudget, Kind: err.(*limits.Exhausted).Kind}
			e := th.Event(event.ThreadRefused)
			e.ThreadID, e.Reason = "", string(ref.Reason)
			l.r.emit(e)
			return thread.Result{}, ref
		}
		m := l.r.newLocalMeter(node.Child(th.Agent.Helper.Budget))
		ctx = WithMeter(ctx, m)
		defer func() { m.lease.Close(limits.SpendOf(res.Own)) }()
	}
	l.r.emit(th.Event(event.ThreadSpawned))
	call.Admitted(th.ID)
	l.threads.Store(th.ID, &th)
	defer l.threads.Delete(th.ID)
	return l.r.runLocal(ctx, &th), nil
}

// localMeter is the meter of a thread run in this process: its lease is
// renewed by a direct call, and its node is where its helpers are counted.
type localMeter struct {
	LimitsMeter
	lease *limits.Lease
}

func (r *Runner) newLocalMeter(n *limits.Node) *localMeter {
	l := n.Lease()
	renew := func(_ context.Context, s limits.Spend, need int64) (limits.Grant, error) {
		return l.Renew(s, need), nil
	}
	return &localMeter{LimitsMeter: LimitsMeter{limits.NewMeter(l.Renew(limits.Spend{}, 0), renew, r.cfg.Now)}, lease: l}
}

// runLocal runs a thread this process placed (Run's root, the in-process
// spawner's helpers) between its thread.started and thread.finished, which
// RunThread leaves to whoever placed the thread.
func (r *Runner) runLocal(ctx context.Context, th *thread.Thread) thread.Result {
	start := r.cfg.Now()
	r.emitOf(th, event.ThreadStarted, start)
	res := r.RunThread(ctx, th)
	r.finished(th, res, start)
	return res
}

// emitOf emits an event of type typ about th, at time at.
func (r *Runner) emitOf(th *thread.Thread, typ event.Type, at time.Time) {
	e := th.Event(typ)
	e.Time = at
	r.emit(e)
}

// finished emits th's thread.finished for its result res, with the
// thread's own usage, as a coordinator's has it (the run's total is on
// run.finished).
func (r *Runner) finished(th *thread.Thread, res thread.Result, start time.Time) {
	e := th.Event(event.ThreadFinished)
	e.Status, e.Reason, e.Usage = res.Status, res.Error, res.Own
	e.Latency = event.Duration(r.cfg.Now().Sub(start))
	r.emit(e)
}
