package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Run slots. A coordinator runs at most Config.MaxRuns queued runs at once
// that are doing something. A run none of whose threads has reported
// anything for Config.RunIdle (a model call's end, a tool call, a spawn, a
// thread's start or end) is only waiting: on a model that does not answer,
// on a person's approval, on a free worker slot, on a long tool call. It
// gives its run slot back, so the next queued run starts in its place, and
// it runs on to its end (its deadline bounds it, as any run's) without a
// slot. It never takes one again: a slot is taken only to take a
// submission. Beside its slots a coordinator holds at most
// Config.MaxIdleRuns runs (it has MaxRuns + MaxIdleRuns consumers of the
// queue, each holding at most one run): past that, it takes no new run
// until one of those it holds ends, as without idle runs.

// Defaults of the run slots.
const (
	// DefaultRunIdle is how long a run's threads report nothing before it
	// gives its run slot back.
	DefaultRunIdle = time.Minute
	// DefaultMaxIdleRuns bounds the runs a coordinator holds beside its
	// run slots.
	DefaultMaxIdleRuns = 32
)

// slot is one run slot a consumer took; give returns it, once.
type slot struct {
	once  sync.Once
	slots chan struct{}
}

// takeSlot waits for a free run slot until ctx ends.
func (c *Coordinator) takeSlot(ctx context.Context) (*slot, bool) {
	select {
	case c.slots <- struct{}{}:
		return &slot{slots: c.slots}, true
	case <-ctx.Done():
		return nil, false
	}
}

// give returns the slot, the first time it is called.
func (s *slot) give() {
	s.once.Do(func() { <-s.slots })
}

// giveBackWhenIdle returns s once run id, taken with it, has been idle
// for Config.RunIdle; stop ends the watch (the run ended). With RunIdle
// negative the run keeps its slot.
func (c *Coordinator) giveBackWhenIdle(id string, s *slot) (stop func()) {
	idle := c.cfg.RunIdle
	if idle < 0 {
		return func() {}
	}
	since := time.Now() // before the run is registered, nothing reports
	return repeat(context.Background(), max(idle/4, 10*time.Millisecond), func() bool {
		if rn := c.run(id); rn != nil {
			since = later(since, rn.lastActive())
		}
		if time.Since(since) < idle {
			return true
		}
		s.give()
		c.cfg.Logger.Info("run idle: its run slot is free for another run", "run_id", id, "idle", time.Since(since).Round(time.Millisecond))
		return false
	})
}

// activity is the clock reading of the latest report about a run or one
// of its threads (UnixNano; 0: none yet).
type activity struct{ at atomic.Int64 }

// touch notes a report now.
func (a *activity) touch() { a.at.Store(time.Now().UnixNano()) }

// time is the latest report's time, zero if none.
func (a *activity) time() time.Time {
	if n := a.at.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// lastActive is when anything last reported about r or its threads.
func (r *run) lastActive() time.Time {
	last := r.active.time()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.threads {
		last = later(last, t.active.time())
	}
	return last
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
