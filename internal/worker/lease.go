package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/thread"
)

// A thread's lease: it lives while its coordinator was heard from within
// the loss window (MissedHeartbeats intervals), measured on the monotonic
// clock, under the epoch the thread was placed in, and while its placement
// has not been fenced. A tool call starts only while the coordinator was
// heard from within one interval and heardSlack: past that, the call
// waits for the next heartbeat, and is refused (the thread stopped) if the
// lease lapses first. So a worker cut off from its coordinator starts no
// new effects for its threads after about one heartbeat, though it keeps
// them for the whole window, in case the silence was a hiccup; a refusal
// comes only where the lease lapsed, never from heartbeat jitter.
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
	// beat is closed, and replaced, whenever sent moves or the epoch
	// changes: tool calls waiting for the coordinator wake on it.
	beat chan struct{}
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
	moved := epoch != c.epoch
	if moved {
		c.epoch, c.base, c.sent = epoch, birth, time.Time{}
	} else if birth.Before(c.base) {
		c.base = birth
	}
	sent := c.base.Add(uptime)
	if sent.After(c.sent) {
		c.sent, moved = sent, true
	}
	if moved && c.beat != nil {
		close(c.beat)
		c.beat = nil
	}
	return sent
}

// heard returns a channel closed when the coordinator is next heard from
// (or restarts).
func (c *coordSeen) heard() <-chan struct{} {
	if c.beat == nil {
		c.beat = make(chan struct{})
	}
	return c.beat
}

// window is how long the coordinator may be silent before it counts as lost.
func (c *coordSeen) window() time.Duration { return MissedHeartbeats * c.interval }

// fresh says whether the coordinator was heard from within the window.
func (c *coordSeen) fresh(now time.Time) bool {
	return !c.sent.IsZero() && now.Sub(c.sent) < c.window()
}

// heardSlack is how much later than one interval after the last
// heartbeat's send a tool call may still start: the jitter of the
// coordinator's ticker and of the message's way here (a quarter of an
// interval: 250 ms at the default second).
func (c *coordSeen) heardSlack() time.Duration { return c.interval / 4 }

// recent says whether the coordinator was heard from within one interval
// and heardSlack: a tool call may start.
func (c *coordSeen) recent(now time.Time) bool {
	return !c.sent.IsZero() && now.Sub(c.sent) <= c.interval+c.heardSlack()
}

// errLapsed is the cause of a thread stopped because its lease lapsed.
var errLapsed = errors.New("placement lapsed")

// guard is the runner's CallGuard: no tool call starts for a thread until
// its coordinator was heard from lately (awaitHeard), nor, after this
// process stood still, before the coordinator confirms the placement (see
// checkPlacement); a thread whose lease lapsed meanwhile is cancelled at
// once.
func (w *Worker) guard(ctx context.Context, th *thread.Thread) error {
	err := w.awaitHeard(ctx, th)
	if err == nil {
		err = w.checkPlacement(ctx, th)
	}
	if err != nil && ctx.Err() == nil {
		w.refuseCall(th, err)
	}
	return err
}

// awaitHeard returns once thread th's coordinator was heard from within
// one interval and its slack (recent), waiting for its next heartbeat if
// need be, but not past the lease: then it says why the lease lapsed.
func (w *Worker) awaitHeard(ctx context.Context, th *thread.Thread) error {
	for {
		now := time.Now()
		w.mu.Lock()
		c, err := w.leaseLocked(th, now)
		if err != nil || c.recent(now) {
			w.mu.Unlock()
			return err
		}
		heard, lapse := c.heard(), c.sent.Add(c.window()).Sub(now)
		w.mu.Unlock()
		select {
		case <-heard:
		case <-time.After(lapse):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// leaseErr says why thread th's lease has lapsed, or nil.
func (w *Worker) leaseErr(th *thread.Thread) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.leaseLocked(th, time.Now())
	return err
}

// leaseLocked returns thread th's coordinator as seen here, or why th's
// lease has lapsed at now. w.mu is held.
func (w *Worker) leaseLocked(th *thread.Thread, now time.Time) (*coordSeen, error) {
	w.noteAliveLocked(now)
	h := w.threads[th.ID]
	if h == nil {
		return nil, fmt.Errorf("%w: thread %s is not hosted here", errLapsed, th.ID)
	}
	if h.fenced {
		return nil, fmt.Errorf("%w: coordinator %s placed thread %s elsewhere", errLapsed, h.coord, th.ID)
	}
	c := w.coords[h.coord]
	switch {
	case c == nil || c.epoch != h.epoch:
		return nil, fmt.Errorf("%w: coordinator %s restarted", errLapsed, h.coord)
	case !c.fresh(now):
		return nil, fmt.Errorf("%w: coordinator %s not heard from for %v", errLapsed, h.coord, now.Sub(c.sent).Round(time.Millisecond))
	}
	return c, nil
}

// refuseCall stops thread th, whose tool call the guard refused for err.
func (w *Worker) refuseCall(th *thread.Thread, err error) {
	w.cfg.Logger.Warn("tool call refused", "thread", th.ID, "reason", err)
	if h := w.hostedThread(th.ID); h != nil {
		w.mu.Lock()
		h.fenced = true
		w.mu.Unlock()
		h.cancel(err)
	}
}

// fenceThread stops a hosted thread whose placement the coordinator says is
// superseded (a fenced reply or a heartbeat naming it). Heartbeats name it
// until it ends, and each of its spawns in flight may be refused: it is
// logged once, with the helpers it leaves to its current placement.
func (w *Worker) fenceThread(id string, attempt int, reason string) {
	if h := w.hostedThread(id); h != nil && (attempt == 0 || h.attempt <= attempt) {
		w.fence(h, fmt.Errorf("%w: %s", errLapsed, reason), "placement superseded: cancelling thread", "reason", reason)
	}
}

// fence marks hosted thread h's placement superseded or lapsed and cancels
// the thread for cause. It logs msg (with attrs) once per placement, with
// the helpers the thread waits on.
func (w *Worker) fence(h *hosted, cause error, msg string, attrs ...any) {
	w.mu.Lock()
	first, helpers := !h.fenced, h.spawning
	h.fenced = true
	w.mu.Unlock()
	if first {
		w.cfg.Logger.Warn(msg, append([]any{"run_id", h.thread.RunID, "thread_id", h.thread.ID, "helpers", helpers}, attrs...)...)
	}
	h.cancel(cause)
}

// superseded says whether thread id's placement here is known to be
// superseded or lapsed.
func (w *Worker) superseded(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.threads[id]
	return h != nil && h.fenced
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
