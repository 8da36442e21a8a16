package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/store"
)

// DefaultLeaseTTL is how long a queued run's lease may go unrenewed before
// another coordinator takes the run over. Its holder renews it four times
// as often.
const DefaultLeaseTTL = 4 * time.Second

// errFenced ends a run here whose lease this coordinator lost: another
// coordinator took it over (or may have: the lease went unrenewed past its
// TTL). The run is left to the new holder untouched: no record write, no
// ack, no nak.
var errFenced = errors.New("run taken over by another coordinator")

// runLease is this coordinator's hold on one running queued run: renewed
// every LeaseTTL/4, and with it the submission kept in progress. Losing it
// cancels the run with errFenced.
type runLease struct {
	c       *Coordinator
	held    *store.HeldLease
	sub     *store.Submission
	renewed atomic.Int64 // time since c.born of the last renewal
	lost    atomic.Bool
	stop    func() // ends the renewals
}

// holdLease takes the lease on queued run rn, started as attempt, and
// renews it until release.
func (c *Coordinator) holdLease(ctx context.Context, s *store.Submission, rn *run, attempt int) (*runLease, error) {
	held, err := c.cfg.Store.HoldLease(ctx, rn.id, store.Lease{Coordinator: c.cfg.ID, Incarnation: c.epoch,
		Attempt: attempt, Ack: s.AckSubject()})
	if err != nil {
		return nil, err
	}
	l := &runLease{c: c, held: held, sub: s}
	l.renewed.Store(int64(c.uptime()))
	l.stop = repeat(ctx, c.cfg.LeaseTTL/4, func() bool { return l.renew(ctx, rn) })
	return l, nil
}

// renew renews the lease once; false means it is lost, or ctx ended.
func (l *runLease) renew(ctx context.Context, rn *run) bool {
	c := l.c
	err := l.held.Renew(ctx)
	if err == nil {
		l.renewed.Store(int64(c.uptime()))
		if err := l.sub.InProgress(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("keep queued run in progress", "run_id", rn.id, "err", err)
		}
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	stale := c.uptime() - time.Duration(l.renewed.Load())
	if !errors.Is(err, store.ErrLeaseLost) && stale <= c.cfg.LeaseTTL/2 {
		c.cfg.Logger.Warn("renew run lease", "run_id", rn.id, "err", err)
		return true
	}
	if !errors.Is(err, store.ErrLeaseLost) {
		err = fmt.Errorf("lease not renewed for %v: %w", stale.Round(time.Millisecond), err)
	}
	l.lose(rn, err)
	return false
}

// lose gives the run up here: it is cancelled with errFenced, and the
// lease is no longer this coordinator's to release.
func (l *runLease) lose(rn *run, err error) {
	if l.lost.Swap(true) {
		return
	}
	l.c.cfg.Logger.Warn("run lease lost: stopping the run here", "run_id", rn.id, "err", err)
	rn.cancel(fmt.Errorf("%w: %w", errFenced, err))
}

// acting says whether this coordinator may still act for rn: always for a
// run it holds no lease on (one not queued), while its lease is fresh for
// the others. Past that another coordinator may hold the run, so rn is
// stopped here and what it would say or write (events, journal entries)
// is dropped: a coordinator continued after standing still does not
// speak for a run it no longer holds, even before its renewal fails.
func (rn *run) acting() bool {
	l := rn.lease.Load()
	if l == nil || l.fresh() {
		return true
	}
	l.lose(rn, fmt.Errorf("lease not renewed for over %v", l.c.cfg.LeaseTTL/2))
	return false
}

// fresh says whether the lease was renewed recently enough that no other
// coordinator can have taken the run over.
func (l *runLease) fresh() bool {
	return !l.lost.Load() && l.c.uptime()-time.Duration(l.renewed.Load()) <= l.c.cfg.LeaseTTL/2
}

// release stops renewing and, unless the lease was lost, removes it: the
// run ended here or went back to the queue.
func (l *runLease) release(ctx context.Context) {
	l.stop()
	if l.lost.Load() {
		return
	}
	if err := l.held.Release(context.WithoutCancel(ctx)); err != nil {
		l.c.cfg.Logger.Warn("release run lease", "run_id", l.sub.Sub.RunID, "err", err)
	}
}

// leasesFresh says whether every lease this coordinator holds is fresh:
// after the process stood still, or while the store cannot be reached, it
// must not vouch for its placements with a heartbeat until it knows which
// runs are still its own.
func (c *Coordinator) leasesFresh() bool {
	for _, r := range c.liveRunList() {
		if l := r.lease.Load(); l != nil && !l.fresh() {
			return false
		}
	}
	return true
}

// leaseWatch is what watchLeases knows: the leases others hold, as it
// last saw each change, and the runs it took over that no coordinator has
// started again yet.
type leaseWatch struct {
	seen  map[string]leaseSeen
	taken map[string]leaseSeen
}

// leaseSeen is a lease entry and when it was seen (or taken over).
type leaseSeen struct {
	e  store.LeaseEntry
	at time.Time
}

// watchLeases takes over the runs whose lease went unrenewed past LeaseTTL
// (their holder died or froze), and at once those held by an earlier
// incarnation of this coordinator: the queue then delivers them again
// without waiting for its AckWait. Each coordinator times the leases on
// its own monotonic clock, from when it saw each one change. It follows
// first, the watch Start made (nil: none yet), and ends once its watch has
// ended, so a coordinator that stops leaves no consumer of the leases
// behind.
func (c *Coordinator) watchLeases(ctx context.Context, first <-chan store.LeaseEntry) {
	w := leaseWatch{seen: map[string]leaseSeen{}, taken: map[string]leaseSeen{}}
	t := time.NewTicker(c.cfg.LeaseTTL / 4)
	defer t.Stop()
	for ctx.Err() == nil {
		ch := first
		first = nil
		if ch == nil {
			var err error
			if ch, err = c.cfg.Store.WatchLeases(ctx); err != nil {
				c.cfg.Logger.Warn("watch run leases", "err", err)
				sleep(ctx, time.Second)
				continue
			}
		}
	follow:
		for {
			select {
			case <-ctx.Done():
				for range ch { // closed once its consumer is deleted
				}
				return
			case e, ok := <-ch:
				if !ok {
					break follow
				}
				w.saw(e)
			case <-t.C:
				c.takeOverExpired(ctx, &w)
				c.giveBackUnclaimed(ctx, &w)
			}
		}
	}
	if first != nil { // stopped before following it
		for range first {
		}
	}
}

// saw notes a change to the leases bucket.
func (w *leaseWatch) saw(e store.LeaseEntry) {
	if e.Gone {
		delete(w.seen, e.Run)
		return
	}
	delete(w.taken, e.Run) // a coordinator runs it again
	if s, ok := w.seen[e.Run]; !ok || s.e.Rev != e.Rev {
		w.seen[e.Run] = leaseSeen{e: e, at: time.Now()}
	}
}

// takeOverExpired takes over every lease that expired.
func (c *Coordinator) takeOverExpired(ctx context.Context, w *leaseWatch) {
	now := time.Now()
	for run, s := range w.seen {
		l := s.e.Lease
		own := l.Coordinator == c.cfg.ID
		if own && l.Incarnation == c.epoch {
			continue
		}
		if !own && now.Sub(s.at) <= c.cfg.LeaseTTL {
			continue
		}
		taken, err := c.cfg.Store.TakeOver(ctx, s.e)
		if err != nil && !taken {
			c.cfg.Logger.Warn("take a run over", "run_id", run, "from", l.Coordinator, "err", err)
			continue // again at the next tick
		}
		delete(w.seen, run)
		if !taken {
			continue // renewed, released or taken meanwhile
		}
		if err != nil {
			c.cfg.Logger.Warn("run taken over, not yet given back to the queue", "run_id", run, "err", err)
		}
		c.cfg.Logger.Info("run taken over", "run_id", run, "from", l.Coordinator, "attempt", l.Attempt,
			"unrenewed", now.Sub(s.at).Round(time.Millisecond))
		c.cfg.Metrics.TakenOver()
		w.taken[run] = leaseSeen{e: s.e, at: now}
	}
}

// giveBackUnclaimed gives a run taken over back to the queue again when
// no coordinator has started it within LeaseTTL of the takeover: the
// queue may have delivered it to a coordinator that froze (a pull it had
// asked before it stood still) or died before it took the lease. It
// stops once a coordinator holds the run, or its record is final.
func (c *Coordinator) giveBackUnclaimed(ctx context.Context, w *leaseWatch) {
	now := time.Now()
	for run, s := range w.taken {
		if now.Sub(s.at) <= c.cfg.LeaseTTL {
			continue
		}
		rec, _, err := c.cfg.Store.GetRecord(ctx, run)
		switch {
		case errors.Is(err, store.ErrNotFound) || err == nil && rec.Status.Final():
			delete(w.taken, run)
			continue
		case err != nil:
			c.cfg.Logger.Warn("run taken over: read its record", "run_id", run, "err", err)
			continue
		}
		c.cfg.Logger.Warn("run taken over but not started again: giving it back to the queue again", "run_id", run,
			"since", now.Sub(s.at).Round(time.Millisecond))
		if err := c.cfg.Store.GiveBack(ctx, run, s.e.Lease.Ack); err != nil {
			c.cfg.Logger.Warn("give a run back to the queue", "run_id", run, "err", err)
		}
		w.taken[run] = leaseSeen{e: s.e, at: now}
	}
}
