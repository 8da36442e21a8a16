package runner

import (
	"context"
	"fmt"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
)

// local runs helpers in this process, admitted against the ledger of the run
// that Runner.Run registered.
type local struct{ r *Runner }

func (l *local) Spawn(ctx context.Context, req SpawnRequest) (Result, error) {
	v, ok := l.r.ledgers.Load(req.RunID)
	if !ok {
		return Result{}, fmt.Errorf("%w: %s", ErrUnknownRun, req.RunID)
	}
	ledger := v.(*limits.Ledger)
	th := req.Thread(l.r.cfg.NewID())
	slot, err := ledger.Admit(th.Depth)
	if err != nil {
		e := th.event(event.ThreadRefused)
		e.ThreadID = ""
		if ref, ok := err.(*limits.Refusal); ok {
			e.Reason = string(ref.Reason)
		}
		l.r.emit(e)
		return Result{}, err
	}
	defer slot.Release()
	l.r.emit(th.event(event.ThreadSpawned))
	return l.r.RunThread(ctx, th), nil
}
