// Package limits keeps the books that bound a run's tree of helpers: how deep
// it may grow and how many helpers may be alive at once.
//
// A Ledger lives in the memory of whoever owns the run (DESIGN rule 8): the
// coordinator (or a test running a whole tree in one process). Admission is
// one compare-and-swap loop, so no lock sits on the spawn path and no storm of
// concurrent spawns can push the live count past the limit.
package limits

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrBadConfig wraps rejected limit settings.
var ErrBadConfig = errors.New("bad limits config")

// Defaults of DESIGN's agent tool rules.
const (
	DefaultMaxDepth   = 4
	DefaultMaxThreads = 16
)

// The exact tool results of a refused spawn.
const (
	DepthMessage  = "Agent depth limit reached. Solve the task yourself."
	ThreadMessage = "Agent thread limit reached. Solve the task yourself."
)

// Reason says why a spawn was refused.
type Reason string

// The refusal reasons, in the order they are checked.
const (
	ReasonDepth   Reason = "depth"
	ReasonThreads Reason = "threads"
	// ReasonBudget is a spawn refused because a budget of its tree is spent.
	ReasonBudget Reason = "budget"
)

// Refusal is the error Admit returns when a limit is reached. Its Error text is
// the exact message the parent's model sees.
type Refusal struct {
	Reason Reason
	// Kind is the spent budget of a ReasonBudget refusal.
	Kind Kind
}

func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonDepth:
		return DepthMessage
	case ReasonBudget:
		return BudgetMessage(r.Kind)
	}
	return ThreadMessage
}

// Config sets the limits; zero values mean the defaults.
type Config struct {
	// MaxDepth is the deepest helper allowed, inclusive: the root is depth 0,
	// its helpers depth 1, and a helper at MaxDepth may exist.
	MaxDepth int
	// MaxThreads is how many helpers may be alive at once; the root is not counted.
	MaxThreads int
}

// Validate rejects negative limits.
func (c Config) Validate() error {
	if c.MaxDepth < 0 || c.MaxThreads < 0 {
		return fmt.Errorf("%w: max depth %d, max threads %d", ErrBadConfig, c.MaxDepth, c.MaxThreads)
	}
	return nil
}

// withDefaults fills in the zero fields of a valid c.
func (c Config) withDefaults() Config {
	orDefault(&c.MaxDepth, DefaultMaxDepth)
	orDefault(&c.MaxThreads, DefaultMaxThreads)
	return c
}

// Ledger is the accounting of one run. The zero value is not usable; use New.
type Ledger struct {
	cfg            Config
	live           atomic.Int64
	peak           atomic.Int64
	admitted       atomic.Int64
	refusedDepth   atomic.Int64
	refusedThreads atomic.Int64
}

// New returns a ledger for one run.
func New(cfg Config) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Ledger{cfg: cfg.withDefaults()}, nil
}

// Admit reserves a slot for a helper at childDepth, checking depth first.
// On success the returned Slot must be released exactly when the helper ends,
// whatever way it ends; on refusal the error is a *Refusal.
func (l *Ledger) Admit(childDepth int) (*Slot, error) {
	if childDepth > l.cfg.MaxDepth {
		l.refusedDepth.Add(1)
		return nil, &Refusal{Reason: ReasonDepth}
	}
	max := int64(l.cfg.MaxThreads)
	for {
		n := l.live.Load()
		if n >= max {
			l.refusedThreads.Add(1)
			return nil, &Refusal{Reason: ReasonThreads}
		}
		if l.live.CompareAndSwap(n, n+1) {
			l.admitted.Add(1)
			l.raisePeak(n + 1)
			return &Slot{ledger: l}, nil
		}
	}
}

func (l *Ledger) raisePeak(n int64) {
	for {
		p := l.peak.Load()
		if n <= p || l.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// Stats is a snapshot of a ledger.
type Stats struct {
	Live           int `json:"live"`
	Peak           int `json:"peak"`
	Admitted       int `json:"admitted"`
	RefusedDepth   int `json:"refused_depth"`
	RefusedThreads int `json:"refused_threads"`
}

// Stats returns the current counts.
func (l *Ledger) Stats() Stats {
	return Stats{
		Live:           int(l.live.Load()),
		Peak:           int(l.peak.Load()),
		Admitted:       int(l.admitted.Load()),
		RefusedDepth:   int(l.refusedDepth.Load()),
		RefusedThreads: int(l.refusedThreads.Load()),
	}
}

// Slot is one admitted helper's place in the live count.
type Slot struct {
	ledger   *Ledger
	released atomic.Bool
}

// Release frees the slot. It is safe to call more than once; only the first
// call counts, so every exit path of a helper may release without care.
func (s *Slot) Release() {
	if s != nil && s.released.CompareAndSwap(false, true) {
		s.ledger.live.Add(-1)
	}
}
