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
	if c.stopTaking != nil {
		c.stopTaking()
	}
	n := c.liveRuns()
	c.cfg.Logger.Info("coordinator draining", "id", c.cfg.ID, "runs", n, "grace", grace)
	if n > 0 {
		t := time.NewTimer(grace)
		select {
		case <-c.idleSignal():
			c.cfg.Logger.Info("drained: every run finished", "id", c.cfg.ID)
		case <-t.C:
			c.cfg.Logger.Warn("drain grace over: handing the remaining runs back to the queue", "id", c.cfg.ID, "runs", c.liveRuns())
		}
		t.Stop()
	}
	return c.Stop()
}

// idleSignal is closed once the coordinator holds no run.
func (c *Coordinator) idleSignal() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	return c.idle
}

// Draining reports whether Drain has begun: the coordinator takes no new
// runs, so it is not ready.
func (c *Coordinator) Draining() bool { return c.draining.Load() }
