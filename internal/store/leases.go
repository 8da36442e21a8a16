package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// LeasesBucket is the KV bucket of run leases: the coordinator running a
// queued run holds the run's key and renews it every few hundred
// milliseconds (HoldLease). Every coordinator watches the bucket
// (WatchLeases); a key its holder stopped renewing is a dead or frozen
// holder's, and one coordinator takes the run over (TakeOver) instead of
// waiting for the queue's AckWait. Only coordinators read or write it.
const LeasesBucket = "formica_leases"

// ErrLeaseLost reports a lease that another coordinator took over (or
// that was released): its former holder must stop acting for the run.
var ErrLeaseLost = errors.New("store: lease taken over")

// Lease is a coordinator's hold on a running queued run.
type Lease struct {
	// Coordinator and Incarnation name the holder and its process: a
	// coordinator that restarts under the same id knows at once that a
	// lease of another incarnation is its dead predecessor's.
	Coordinator string `json:"coordinator"`
	Incarnation string `json:"incarnation"`
	// Attempt is the run record's Attempts when the holder started the
	// run: the fencing token its record updates carry.
	Attempt int `json:"attempt"`
	// Ack is the ack subject of the submission's delivery: who takes the
	// run over naks it there, so the queue delivers it again at once.
	Ack string `json:"ack"`
}

// leasesConfig is the leases bucket of cfg. A lease lives as long as its
// run runs, at most a run's deadline and a takeover: the TTL only clears
// what a crash left behind.
func leasesConfig(cfg Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: LeasesBucket, Description: "Formica leases of running queued runs",
		History: 1, TTL: cfg.Retention, Storage: jetstream.FileStorage, Replicas: cfg.Replicas}
}

// HeldLease is the lease on one run this process holds.
type HeldLease struct {
	kv  jetstream.KeyValue
	run string
	val []byte
	rev uint64
}

// HoldLease takes the lease on run run for l, over any earlier holder's:
// the caller was just delivered the run's submission, so an earlier
// holder is stale, and its next Renew fails with ErrLeaseLost.
func (s *Store) HoldLease(ctx context.Context, run string, l Lease) (*HeldLease, error) {
	if err := checkID(run); err != nil {
		return nil, err
	}
	if s.leases == nil {
		return nil, fmt.Errorf("store: lease of run %s: %w", run, ErrClient)
	}
	val, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rev, err := s.leases.Put(ctx, run, val)
	if err != nil {
		return nil, fmt.Errorf("store: lease of run %s: %w", run, err)
	}
	return &HeldLease{kv: s.leases, run: run, val: val, rev: rev}, nil
}

// Renew writes the lease again if nobody changed it since this holder's
// last write: ErrLeaseLost if somebody did (a takeover), another error if
// the store could not be reached (try again; the watchers' clock runs).
func (h *HeldLease) Renew(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rev, err := h.kv.Update(ctx, h.run, h.val, h.rev)
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: run %s", ErrLeaseLost, h.run)
	case err != nil:
		return fmt.Errorf("store: renew lease of run %s: %w", h.run, err)
	}
	h.rev = rev
	return nil
}

// Release removes the lease if this holder still has it: the run ended
// here, or went back to the queue.
func (h *HeldLease) Release(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := h.kv.Delete(ctx, h.run, jetstream.LastRevision(h.rev))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: run %s", ErrLeaseLost, h.run)
	}
	return err
}

// LeaseEntry is one change to the leases bucket as a watcher sees it.
type LeaseEntry struct {
	Run   string
	Rev   uint64
	Lease Lease
	// Gone says the lease was released or taken over.
	Gone bool
}

// WatchLeases follows the leases bucket: every lease held now, then every
// change, on a channel closed when ctx ends or the watch breaks (watch
// again). A value that does not decode is skipped. The watch is an ordered
// consumer of the bucket's stream (R1, in memory), deleted before the
// channel closes.
func (s *Store) WatchLeases(ctx context.Context) (<-chan LeaseEntry, error) {
	if s.leases == nil {
		return nil, fmt.Errorf("store: watch leases: %w", ErrClient)
	}
	// The watch ends by Stop alone, which deletes its consumer before
	// returning: ended by its context, the library would unsubscribe
	// and delete on a goroutine of its own, and Stop return at once.
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	w, err := s.leases.WatchAll(wctx)
	if err != nil {
		stopWatch()
		return nil, fmt.Errorf("store: watch leases: %w", err)
	}
	out := make(chan LeaseEntry, 64)
	go func() {
		defer close(out)
		defer func() {
			_ = w.Stop()
			stopWatch() // its goroutine finds it stopped
			go func() { // drained, so the watcher's own goroutine ends
				for range w.Updates() {
				}
			}()
		}()
		for {
			var e jetstream.KeyValueEntry
			var ok bool
			select {
			case <-ctx.Done():
				return
			case e, ok = <-w.Updates():
			}
			if !ok {
				return
			}
			if e == nil { // end of the leases held now
				continue
			}
			le := LeaseEntry{Run: e.Key(), Rev: e.Revision(), Gone: e.Operation() != jetstream.KeyValuePut}
			if !le.Gone {
				if err := json.Unmarshal(e.Value(), &le.Lease); err != nil {
					s.log.Warn("store: undecodable lease", "run_id", e.Key(), "err", err)
					continue
				}
			}
			select {
			case out <- le:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TakeOver ends the lease e (if it is still at e's revision: one
// coordinator wins) and gives the run's submission back to the queue at
// once, so whichever coordinator is free runs it next. taken is false if
// the lease moved meanwhile (renewed, released, or taken by another).
func (s *Store) TakeOver(ctx context.Context, e LeaseEntry) (taken bool, err error) {
	if s.leases == nil {
		return false, fmt.Errorf("store: take over run %s: %w", e.Run, ErrClient)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err = s.leases.Delete(ctx, e.Run, jetstream.LastRevision(e.Rev))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: take over run %s: %w", e.Run, err)
	}
	return true, s.GiveBack(ctx, e.Run, e.Lease.Ack)
}

// GiveBack makes run's submission, delivered with the ack subject ack,
// deliverable again at once, whoever holds it now: the ack protocol acts
// on the message (by its stream sequence) whatever connection sends it and
// whichever delivery named the subject. A submission no longer in the
// queue is left alone.
func (s *Store) GiveBack(ctx context.Context, run, ack string) error {
	if ack == "" {
		return nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := s.nc.RequestWithContext(ctx, ack, []byte("-NAK")); err != nil {
		return fmt.Errorf("store: give run %s back to the queue: %w", run, err)
	}
	return nil
}
