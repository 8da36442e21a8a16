package runner

import (
	"context"
	"fmt"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/thread"
)

// local runs helpers in this process, admitted against the ledger of the run
// that Runner.Run registered.
type local struct{ r *Runner }

func (l *local) Spawn(ctx context.Context, req SpawnRequest) (res thread.Result, err error) {
	v, ok := l.r.ledgers.Load(req.RunID)
	if !ok {
		return thread.Result{}, fmt.Errorf("%w: %s", ErrUnknownRun, req.RunID)
	}
	ledger := v.(*limits.Ledger)
	th := req.Thread(req.ChildID(l.r.cfg.NewID))
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
		pm.lease.Release(req.ParentSpent.InputTokens, req.ParentSpent.OutputTokens)
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
		defer func() { m.lease.Close(res.Own.InputTokens, res.Own.OutputTokens) }()
	}
	l.r.emit(th.Event(event.ThreadSpawned))
	req.ReportAdmitted(th.ID)
	return l.r.RunThread(ctx, &th), nil
}
