package coordinator

import (
	"time"
)

// DefaultDrainGrace is how long Drain lets running runs go on.
const DefaultDrainGrace = 30 * time.Second

// accepting reports whether the coordinator opens new runs.
func (c *Coordinator) accepting() bool { return c.state.Load() == 1 && !c.draining.Load() }

// Drain is what SIGTERM does: the coordinator stops taking runs (queued
// ones stay in the queue for other coordinators, direct submissions are
// refused as draining), lets the runs it holds go on for up to grace,
// then stops: runs still going are handed back to the queue untouched for
// another coordinator (see Stop). Placements, approvals and results of the
// runs it holds are served throughout. Safe to call twice, and after Stop.
func (c *Coordinator) Drain(grace time.Duration) error {
	if c.state.Load() != 1 || !c.draining.CompareAndSwap(false, true) {
		return c.Stop()
	}
	c.stopTaking()
	n := c.liveRuns()
	c.cfg.Logger.Info("coordinator draining", "id", c.cfg.ID, "runs", n, "grace", grace)
	switch {
	case n == 0:
	case c.waitIdle(grace):
		c.cfg.Logger.Info("drained: every run finished", "id", c.cfg.ID)
	default:
		c.cfg.Logger.Warn("drain grace over: handing the remaining runs back to the queue", "id", c.cfg.ID, "runs", c.liveRuns())
	}
	return c.Stop()
}

// waitIdle waits, at most d, until the coordinator holds no run; false
// means d passed first.
func (c *Coordinator) waitIdle(d time.Duration) bool {
	c.mu.Lock()
	if len(c.runs) == 0 {
		c.mu.Unlock()
		return true
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-time.After(d):
		return false
	}
}

// Draining reports whether Drain has begun: the coordinator takes no new
// runs, so it is not ready.
func (c *Coordinator) Draining() bool { return c.draining.Load() }
