package limits

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// RenewFunc reports what a thread spent since its last grant and returns
// its next grant; need is what its next model call is estimated to cost, in
// micro-dollars (see Lease.Renew).
type RenewFunc func(ctx context.Context, s Spend, need int64) (Grant, error)

// Estimate is what a model call is expected to cost before it is sent:
// Micros, its input and its max_tokens of output at its model's prices, in
// micro-dollars; Unpriced when its model has no price (Model names it).
type Estimate struct {
	Micros   int64
	Unpriced bool
	Model    string
}

// ErrUnpriced refuses a model call under a usd budget whose model has no
// price: what it costs could not be counted.
var ErrUnpriced = errors.New("no price")

// Meter checks one thread's model calls against its grant on the thread's
// own side: a call whose grant still has tokens and time left starts
// without asking anyone, so the check costs a lock and a clock read; only a
// used-up grant asks the run's owner (renew) for the next one. Under a usd
// budget the grant holds one call's estimated cost, so each call renews.
type Meter struct {
	mu       sync.Mutex
	grant    Grant
	deadline time.Time
	spent    Spend // since the grant
	renew    RenewFunc
	now      func() time.Time
}

// NewMeter starts a meter on grant g (from when the thread was placed).
// now is the clock (nil: time.Now).
func NewMeter(g Grant, renew RenewFunc, now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	m := &Meter{renew: renew, now: now}
	m.set(g)
	return m
}

func (m *Meter) set(g Grant) {
	m.grant, m.spent = g, Spend{}
	m.deadline = time.Time{}
	if g.Remaining > 0 {
		m.deadline = m.now().Add(g.Remaining)
	}
}

// Before is asked before every model call, with the call's estimated cost:
// nil lets it start, a *Exhausted (or the renewal's error, or ErrUnpriced
// for a model with no price under a usd budget) forbids it.
func (m *Meter) Before(ctx context.Context, est Estimate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant.Spent != nil {
		return m.grant.Spent
	}
	if m.grant != (Grant{}) { // not parked: the grant says whether money is bounded
		if err := m.priced(est); err != nil {
			return err
		}
	}
	if m.fits(est) {
		return nil
	}
	g, err := m.renew(ctx, m.spent, max(est.Micros, 0))
	if err != nil {
		return err
	}
	m.set(g)
	if g.Spent != nil {
		return g.Spent
	}
	if err := m.priced(est); err != nil {
		return err
	}
	if !m.fitsUSD(est) {
		// The owner granted less than the call needs.
		return &Exhausted{Kind: KindUSD, Used: m.spent.Micros, Limit: g.USD}
	}
	return nil
}

// priced refuses a call with no price when a usd budget bounds the thread.
// m.mu is held.
func (m *Meter) priced(est Estimate) error {
	if est.Unpriced && m.grant.USD < Unlimited {
		return fmt.Errorf("%w for model %s: a usd budget cannot count its calls (give it one in a prices file, --prices)", ErrUnpriced, est.Model)
	}
	return nil
}

// fits reports whether the grant has tokens, time and, for a call costing
// est, money left. m.mu is held.
func (m *Meter) fits(est Estimate) bool {
	g, s := m.grant, m.spent
	if s.In+s.Out >= g.Tokens || s.In >= g.InputTokens || s.Out >= g.OutputTokens || !m.fitsUSD(est) {
		return false
	}
	return m.deadline.IsZero() || m.now().Before(m.deadline)
}

// fitsUSD reports whether the grant holds a call costing est. m.mu is held.
func (m *Meter) fitsUSD(est Estimate) bool {
	return m.grant.USD >= Unlimited || m.spent.Micros+max(est.Micros, 0) <= m.grant.USD
}

// Park drops the grant when the thread starts waiting on helpers and
// returns what it spent since the grant, for the owner's Lease.Release:
// its share of the budget goes to its helpers, and its next model call
// renews.
func (m *Meter) Park() Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.spent
	m.spent = Spend{}
	if m.grant.Spent == nil {
		m.grant, m.deadline = Grant{}, time.Time{}
	}
	return s
}

// After is told each model call's spending.
func (m *Meter) After(s Spend) {
	m.mu.Lock()
	m.spent = m.spent.add(s.clamp())
	m.mu.Unlock()
}
