package runner

import (
	"context"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
)

// Meter is asked before every model call of a thread, with the call's
// estimated cost (see estimateCost), and told each call's usage after it. Before returns a *limits.Exhausted when the thread's
// budget is spent: the thread then fails with "budget exhausted (<kind>)".
// A worker's meter holds a lease of budget from the run's coordinator, so
// most checks ask nobody.
//
// Park is called when the thread spawns a helper: it makes no model call
// while it waits, so it gives its share of the budget back, returning what
// it spent since its last grant; the SpawnRequest carries that to the
// run's owner.
type Meter interface {
	Before(ctx context.Context, est limits.Estimate) error
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

// After counts u, its tokens and cost, against the grant.
func (m LimitsMeter) After(u model.Usage) { m.Meter.After(limits.SpendOf(u)) }

// Park drops the grant and returns what was spent since.
func (m LimitsMeter) Park() model.Usage { return m.Meter.Park().Usage() }

// CostEstimator is a model that knows its prices: Cost is what a call
// with usage u would cost in US dollars, ok false when the model has no
// price. The worker's priced models are.
type CostEstimator interface {
	Cost(u model.Usage) (usd float64, ok bool)
}

// estimateCost is what the call req of the thread's model is expected to
// cost, for its budget's reservation: its input as the thread estimates its
// tokens (the same estimate that keeps it inside its context window), all
// at the input price (a cache makes it cheaper, never dearer), and its
// output at its max_tokens, or model.DefaultOutputEstimate when it sets
// none, at the output price. A model that does not know its prices is
// unpriced.
func (st *threadState) estimateCost(req model.Request) limits.Estimate {
	est := limits.Estimate{Model: st.ref.String()}
	ce, ok := st.mdl.(CostEstimator)
	if !ok {
		est.Unpriced = true
		return est
	}
	out := int64(model.DefaultOutputEstimate)
	if n, ok := req.Args.MaxTokens(); ok && n > 0 {
		out = n
	}
	usd, ok := ce.Cost(model.Usage{InputTokens: st.estimate(requestBytes(req.Messages, req.Tools)), OutputTokens: out})
	est.Micros, est.Unpriced = limits.ToMicros(usd), !ok
	return est
}
