package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// A worker whose process stood still (SIGSTOP, a paused VM, a machine that
// slept) may wake up to a coordinator that has long placed its threads
// elsewhere. The lease alone cannot tell: heartbeats sent just before the
// wake-up are fresh, and the one naming the superseded placement may be
// read only after a thread has started its next tool call. So the worker
// watches its own monotonic clock: the ticker, the exec handler and every
// tool call note that the process runs, and a stretch between two notes
// long enough for the coordinator to have heard nothing of a placement for
// a loss window is a standstill. Until the coordinator confirms a
// placement after a standstill (a PlacementCheck with the placement's
// token, answered ok or fenced; asked again while the coordinator is heard
// from but slow to answer, refused once it is not), no tool call of that
// placement starts. A worker that never stood still asks nobody.

// standstillAfter is the gap between two notes that counts as a standstill:
// the coordinator counts a placement's silence from its last progress,
// which may be an interval older than the last note, so a gap of one
// interval less than the loss window may already have cost the placement.
func (w *Worker) standstillAfter() time.Duration {
	return (MissedHeartbeats - 1) * w.cfg.HeartbeatInterval
}

// noteAliveLocked records that the process runs at now and reports a
// standstill since the last note. w.mu is held.
func (w *Worker) noteAliveLocked(now time.Time) {
	if !w.alive.IsZero() {
		if gap := now.Sub(w.alive); gap > w.standstillAfter() {
			w.stoodStill = now
			w.gaps = append(w.gaps, gap)
		}
	}
	if now.After(w.alive) {
		w.alive = now
	}
}

// logStandstills logs the standstills noted since the last call.
func (w *Worker) logStandstills() {
	w.mu.Lock()
	gaps := w.gaps
	w.gaps = nil
	w.mu.Unlock()
	for _, g := range gaps {
		w.cfg.Logger.Warn("process stood still: placements are confirmed before their next tool call", "gap", g.Round(time.Millisecond))
	}
}

// maxAsks bounds the checks of one tool call: it asks again while its
// coordinator is still heard from but the answer is late (a loaded
// machine), and when the process stood still again while it waited.
const maxAsks = 5

// checkPlacement asks the coordinator whether thread th's placement is
// still current if the process stood still since it was last known to be.
func (w *Worker) checkPlacement(ctx context.Context, th *thread.Thread) error {
	defer w.logStandstills()
	for range maxAsks {
		w.mu.Lock()
		h := w.threads[th.ID]
		if h == nil {
			w.mu.Unlock()
			return fmt.Errorf("%w: thread %s is not hosted here", errLapsed, th.ID)
		}
		if !h.current.Before(w.stoodStill) {
			w.mu.Unlock()
			return nil
		}
		coord, token := h.coord, h.token
		w.mu.Unlock()
		asked := time.Now()
		answered, err := w.askPlacement(ctx, th, coord, token)
		if err != nil {
			if answered || ctx.Err() != nil {
				return err
			}
			if lapsed := w.leaseErr(th); lapsed != nil {
				return lapsed
			}
			continue // the coordinator is alive: ask again
		}
		w.mu.Lock()
		if h.current.Before(asked) {
			h.current = asked
		}
		w.mu.Unlock()
	}
	return fmt.Errorf("%w: the coordinator did not confirm the placement after the process stood still", errLapsed)
}

// askPlacement sends one PlacementCheck and waits, at most a loss window,
// for the answer. Anything but ok refuses the call; answered says whether
// the coordinator (or the server, saying nobody listens) answered at all.
func (w *Worker) askPlacement(ctx context.Context, th *thread.Thread, coord, token string) (answered bool, err error) {
	wait := w.silence(coord)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg := wire.Message(wire.TypePlacementCheck, wire.PlacementCheck{RunID: th.RunID, ThreadID: th.ID, Token: token})
	call, err := transport.Request(ctx, w.tr, wire.SubjectPlacement(coord, w.cfg.ID), wire.WithIDs(msg, th.RunID, th.ID))
	if err != nil {
		return false, fmt.Errorf("%w: coordinator %s could not be asked to confirm the placement: %w", errLapsed, coord, err)
	}
	defer call.Close()
	m, err := call.Next(ctx, wait)
	switch {
	case errors.Is(err, transport.ErrNoResponders):
		answered = true
	case err == nil:
		answered = true
		if err = wire.MsgError(m); err == nil && m.Type != string(wire.TypeOK) {
			err = fmt.Errorf("%w: unexpected %s reply", wire.ErrBadMessage, m.Type)
		}
	}
	if err != nil {
		return answered, fmt.Errorf("%w: coordinator %s did not confirm the placement: %w", errLapsed, coord, err)
	}
	return true, nil
}
