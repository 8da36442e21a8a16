package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/wire"
)

// A thread's lease: it may start a tool call only while its coordinator was
// heard from within the loss window (MissedHeartbeats intervals), measured
// on the monotonic clock, under the epoch the thread was placed in, and
// while its placement has not been fenced.
//
// "Heard from" is when the coordinator sent, not when this worker read:
// a worker frozen (SIGSTOP) past the window wakes up to heartbeats that sat
// in its socket, and reading them late must not renew a lease its
// coordinator has long given up on. Every coordinator message carries the
// coordinator's monotonic age (Uptime); the earliest arrival seen fixes
// where the coordinator's birth lies on this worker's clock (base), and a
// message's send time is then base + Uptime, however late it is read.

// coordSeen is what this worker knows of one coordinator's liveness.
type coordSeen struct {
	epoch    string
	base     time.Time // the coordinator's birth on this worker's clock
	sent     time.Time // the latest send time heard
	interval time.Duration
}

// see records a message from a coordinator sent at age uptime in epoch,
// and returns when it was sent, on this worker's clock.
func (c *coordSeen) see(epoch string, uptime, interval time.Duration, now time.Time) time.Time {
	if interval > 0 {
		c.interval = interval
	}
	if c.interval <= 0 {
		c.interval = DefaultHeartbeatInterval
	}
	birth := now.Add(-uptime)
	if epoch != c.epoch {
		c.epoch, c.base, c.sent = epoch, birth, time.Time{}
	} else if birth.Before(c.base) {
		c.base = birth
	}
	sent := c.base.Add(uptime)
	if sent.After(c.sent) {
		c.sent = sent
	}
	return sent
}

// window is how long the coordinator may be silent before it counts as lost.
func (c *coordSeen) window() time.Duration { return MissedHeartbeats * c.interval }

// fresh says whether the coordinator was heard from within the window.
func (c *coordSeen) fresh(now time.Time) bool {
	return !c.sent.IsZero() && now.Sub(c.sent) <= c.window()
}

// errLapsed is the cause of a thread stopped because its lease lapsed.
var errLapsed = errors.New("placement lapsed")

// guard is the runner's CallGuard: no tool call starts for a thread whose
// lease has lapsed, nor, after this process stood still, before the
// coordinator confirms the placement (see checkPlacement); such a thread is
// cancelled at once.
func (w *Worker) guard(ctx context.Context, th *thread.Thread) error {
	err := w.leaseErr(th)
	if err == nil {
		err = w.checkPlacement(ctx, th)
	}
	if err != nil {
		w.refuseCall(th, err)
	}
	return err
}

// leaseErr says why thread th's lease has lapsed, or nil.
func (w *Worker) leaseErr(th *thread.Thread) error {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noteAliveLocked(now)
	h := w.threads[th.ID]
	var err error
	switch {
	case h == nil:
		err = fmt.Errorf("%w: thread %s is not hosted here", errLapsed, th.ID)
	case h.fenced:
		err = fmt.Errorf("%w: coordinator %s placed thread %s elsewhere", errLapsed, h.coord, th.ID)
	default:
		c := w.coords[h.coord]
		switch {
		case c == nil || c.epoch != h.epoch:
			err = fmt.Errorf("%w: coordinator %s restarted", errLapsed, h.coord)
		case !c.fresh(now):
			err = fmt.Errorf("%w: coordinator %s not heard from for %v", errLapsed, h.coord, now.Sub(c.sent).Round(time.Millisecond))
		}
	}
	return err
}

// refuseCall stops thread th, whose tool call the guard refused for err.
func (w *Worker) refuseCall(th *thread.Thread, err error) {
	w.mu.Lock()
	var cancel context.CancelCauseFunc
	if h := w.threads[th.ID]; h != nil {
		h.fenced = true
		cancel = h.cancel
	}
	w.mu.Unlock()
	w.cfg.Logger.Warn("tool call refused", "thread", th.ID, "reason", err)
	if cancel != nil {
		cancel(err)
	}
}

// fenceThread stops a hosted thread whose placement the coordinator says is
// superseded (a fenced reply or a heartbeat naming it). Heartbeats name it
// until it ends, and each of its spawns in flight may be refused: it is
// logged once, with the helpers it leaves to its current placement.
func (w *Worker) fenceThread(id string, attempt int, reason string) {
	w.mu.Lock()
	h := w.threads[id]
	var cancel context.CancelCauseFunc
	first, helpers, run := false, 0, ""
	if h != nil && (attempt == 0 || h.attempt <= attempt) {
		first, helpers, run = !h.fenced, h.spawning, h.thread.RunID
		h.fenced = true
		cancel = h.cancel
	}
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	if first {
		w.cfg.Logger.Warn("placement superseded: cancelling thread", "run_id", run, "thread_id", id, "helpers", helpers, "reason", reason)
	}
	cancel(fmt.Errorf("%w: %s", errLapsed, reason))
}

// superseded says whether thread id's placement here is known to be
// superseded or lapsed.
func (w *Worker) superseded(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.threads[id]
	return h != nil && h.fenced
}

// fencedReply reports whether err is a coordinator's refusal of a
// superseded placement.
func fencedReply(err error) bool {
	return errors.Is(err, wire.ErrFenced)
}

// placement returns the coordinator and token of hosted thread id.
func (w *Worker) placement(id string) (coord, token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.threads[id]; h != nil {
		return h.coord, h.token
	}
	return "", ""
}
