package limits

import (
	"context"
	"sync"
	"time"
)

// RenewFunc reports what a thread spent since its last grant and returns
// its next grant.
type RenewFunc func(ctx context.Context, in, out int64) (Grant, error)

// Meter checks one thread's model calls against its grant on the thread's
// own side: a call whose grant still has tokens and time left starts
// without asking anyone, so the check costs a lock and a clock read; only a
// used-up grant asks the run's owner (renew) for the next one.
type Meter struct {
	mu       sync.Mutex
	grant    Grant
	deadline time.Time
	in, out  int64 // spent since the grant
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
	m.grant, m.in, m.out = g, 0, 0
	m.deadline = time.Time{}
	if g.Remaining > 0 {
		m.deadline = m.now().Add(g.Remaining)
	}
}

// Before is asked before every model call: nil lets it start, a *Exhausted
// (or the renewal's error) forbids it.
func (m *Meter) Before(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant.Spent != nil {
		return m.grant.Spent
	}
	if m.fits() {
		return nil
	}
	g, err := m.renew(ctx, m.in, m.out)
	if err != nil {
		return err
	}
	m.set(g)
	if g.Spent != nil {
		return g.Spent
	}
	return nil
}

// fits reports whether the grant has tokens and time left. m.mu is held.
func (m *Meter) fits() bool {
	g := m.grant
	if m.in+m.out >= g.Tokens || m.in >= g.InputTokens || m.out >= g.OutputTokens {
		return false
	}
	return m.deadline.IsZero() || m.now().Before(m.deadline)
}

// Park drops the grant when the thread starts waiting on helpers and
// returns what it spent since the grant, for the owner's Lease.Release:
// its share of the budget goes to its helpers, and its next model call
// renews.
func (m *Meter) Park() (in, out int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, out = m.in, m.out
	m.in, m.out = 0, 0
	if m.grant.Spent == nil {
		m.grant, m.deadline = Grant{}, time.Time{}
	}
	return in, out
}

// After is told each model call's usage.
func (m *Meter) After(in, out int64) {
	m.mu.Lock()
	m.in += in
	m.out += out
	m.mu.Unlock()
}
