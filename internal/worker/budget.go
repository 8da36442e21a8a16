package worker

import (
	"context"
	"fmt"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// meter is a hosted thread's budget meter: it starts on the grant that
// came with the thread's placement and asks the run's coordinator for the
// next one only when that is used up, so most model calls ask nobody.
//
// A placement without a grant (the zero Grant, which the coordinator's
// leases never hand out) is not metered.
func (w *Worker) meter(req *wire.ExecRequest) runner.Meter {
	if req.Grant == (limits.Grant{}) {
		return nil
	}
	run, thread, coord, token := req.Thread.RunID, req.Thread.ID, req.Coordinator, req.Token
	renew := func(ctx context.Context, s limits.Spend, need int64) (limits.Grant, error) {
		msg := wire.Message(wire.TypeBudgetRenew, wire.BudgetRenew{RunID: run, ThreadID: thread, Token: token,
			InputTokens: s.In, OutputTokens: s.Out, CostMicros: s.Micros, NeedMicros: need})
		call, err := transport.Request(ctx, w.tr, wire.SubjectBudget(coord, w.cfg.ID), wire.WithIDs(msg, run, thread))
		if err != nil {
			return limits.Grant{}, fmt.Errorf("budget: coordinator %s unreachable: %w", coord, err)
		}
		defer call.Close()
		m, err := call.Next(ctx, w.silence(coord))
		if err != nil {
			return limits.Grant{}, peerError("budget: coordinator "+coord, err)
		}
		if err := wire.MsgError(m); err != nil {
			return limits.Grant{}, fmt.Errorf("budget: %w", err)
		}
		var g limits.Grant
		if err := wire.DecodeAs(m.Data, wire.TypeBudgetGrant, &g); err != nil {
			return limits.Grant{}, fmt.Errorf("budget: %w", err)
		}
		return g, nil
	}
	return runner.LimitsMeter{Meter: limits.NewMeter(req.Grant, renew, nil)}
}
