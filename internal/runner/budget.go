package runner

import (
	"context"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
)

// Meter is asked before every model call of a thread and told each call's
// usage after it. Before returns a *limits.Exhausted when the thread's
// budget is spent: the thread then fails with "budget exhausted (<kind>)".
// A worker's meter holds a lease of budget from the run's coordinator, so
// most checks ask nobody.
//
// Park is called when the thread spawns a helper: it makes no model call
// while it waits, so it gives its share of the budget back, returning what
// it spent since its last grant; the SpawnRequest carries that to the
// run's owner.
type Meter interface {
	Before(ctx context.Context) error
	After(u model.Usage)
	Park() model.Usage
}

type meterKey struct{}

// WithMeter gives the thread run with ctx its meter.
func WithMeter(ctx context.Context, m Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

func meterFrom(ctx context.Context) Meter {
	m, _ := ctx.Value(meterKey{}).(Meter)
	return m
}

// LimitsMeter adapts a limits.Meter to a Meter.
type LimitsMeter struct{ *limits.Meter }

// After counts u against the grant.
func (m LimitsMeter) After(u model.Usage) { m.Meter.After(u.InputTokens, u.OutputTokens) }

// Park drops the grant and returns what was spent since.
func (m LimitsMeter) Park() model.Usage {
	in, out := m.Meter.Park()
	return model.Usage{InputTokens: in, OutputTokens: out}
}
