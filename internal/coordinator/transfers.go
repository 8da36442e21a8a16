package coordinator

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// Bodies over the NATS max payload travel through per-party transfers
// buckets (see store.Offloader): a worker writes only into its own, which a
// coordinator makes when the worker joins (its credentials create no
// stream), and a message from a worker is read only from that worker's
// bucket.

// transfersOpenTimeout bounds the making of one worker's bucket.
const transfersOpenTimeout = 15 * time.Second

// senderOf is the coordinator's natstransport.Config.Sender: the worker a
// message came from (the last token of the subjects it serves for workers,
// pinned to the sender by its credentials; the worker a placement was sent
// to, for that placement's replies), whose bucket alone its references may
// name. Messages on other subjects (clients', coordinators') carry none.
func senderOf(subject string) string {
	if strings.HasPrefix(subject, wire.WorkerSubjectPrefix) {
		return bucketOf(wire.WorkerUnder(wire.WorkerSubjectPrefix, subject))
	}
	if rest, ok := strings.CutPrefix(subject, "formica.coord."); ok && strings.Count(rest, ".") == 2 {
		if id := wire.SenderOf(subject); id != wire.AnyWorker {
			return bucketOf(id)
		}
	}
	return ""
}

// recipientOf is the coordinator's natstransport.Config.Recipient: a body
// sent to a worker (on its subjects, or in a reply to its inbox) goes into
// that worker's bucket, where no other worker reads it; any other into the
// coordinators' own.
func recipientOf(subject string) string {
	for _, prefix := range []string{wire.WorkerSubjectPrefix, wire.WorkerInboxPrefix} {
		if strings.HasPrefix(subject, prefix) {
			return bucketOf(wire.WorkerUnder(prefix, subject))
		}
	}
	return ""
}

// bucketOf is worker id's transfers bucket, or "" for no worker.
func bucketOf(id string) string {
	if id == "" {
		return ""
	}
	return store.WorkerTransfers(id)
}

// buckets are the workers whose transfers buckets this coordinator made, or
// is making.
type buckets struct {
	mu      sync.Mutex
	opening map[string]bool // worker id -> made (true) or being made (false)
}

// admit takes a worker's checked heartbeat: at once when its bucket was
// made (or there is no store), else once it is made. A worker joins only
// after its bucket exists, so its first large body finds it; a bucket that
// could not be made is tried again on a later heartbeat, and the worker
// joins meanwhile all the same.
func (c *Coordinator) admit(hb wire.WorkerHeartbeat) {
	if c.cfg.Store == nil {
		c.joined(hb)
		return
	}
	c.buckets.mu.Lock()
	made, seen := c.buckets.opening[hb.ID]
	switch {
	case made:
		c.buckets.mu.Unlock()
		c.joined(hb)
		return
	case seen:
		c.buckets.mu.Unlock()
		if c.registry.has(hb.ID) {
			c.joined(hb)
		}
		return
	}
	if c.buckets.opening == nil {
		c.buckets.opening = map[string]bool{}
	}
	c.buckets.opening[hb.ID] = false
	c.buckets.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(c.background, transfersOpenTimeout)
		err := c.cfg.Store.OpenWorkerTransfers(ctx, hb.ID)
		cancel()
		c.buckets.mu.Lock()
		if err != nil {
			delete(c.buckets.opening, hb.ID)
		} else {
			c.buckets.opening[hb.ID] = true
		}
		c.buckets.mu.Unlock()
		if c.background.Err() != nil {
			return
		}
		if err != nil {
			c.cfg.Logger.Warn("worker's transfers bucket not made: its bodies over the NATS max payload fail until it is",
				"worker", hb.ID, "err", err)
		}
		c.joined(hb)
	}()
}

// bucketUnknown forgets that worker id's bucket was made: the bucket of a
// worker lost may be removed (sweepTransfers, here or by another
// coordinator), so it is made again if the worker comes back.
func (c *Coordinator) bucketUnknown(id string) {
	c.buckets.mu.Lock()
	delete(c.buckets.opening, id)
	c.buckets.mu.Unlock()
}

// knownBuckets maps the transfers bucket of every worker this coordinator
// knows (live, or with its bucket made or being made) to the worker.
func (c *Coordinator) knownBuckets() map[string]string {
	known := map[string]string{}
	for _, w := range c.registry.list() {
		known[store.WorkerTransfers(w.ID)] = w.ID
	}
	c.buckets.mu.Lock()
	for id := range c.buckets.opening {
		known[store.WorkerTransfers(id)] = id
	}
	c.buckets.mu.Unlock()
	return known
}

// sweepTransfers removes, once per Config.TransfersSweep, the transfers
// buckets that hold nothing and whose workers this coordinator has not
// known for a whole sweep: each is a stream the server keeps for good, and
// a worker whose id is new at every start (a coordinator's local workers)
// leaves one behind each time. A worker that joins while its bucket is
// removed gets it back.
func (c *Coordinator) sweepTransfers() {
	defer c.loops.Done()
	t := time.NewTicker(c.cfg.TransfersSweep)
	defer t.Stop()
	var unknown map[string]bool // empty and not known at the last sweep
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.background, transfersOpenTimeout)
		unknown = c.sweepTransfersOnce(ctx, unknown)
		cancel()
	}
}

// sweepTransfersOnce removes the empty buckets of workers unknown now and
// at the last sweep (was), and returns those unknown for the first time.
func (c *Coordinator) sweepTransfersOnce(ctx context.Context, was map[string]bool) map[string]bool {
	st := c.cfg.Store
	empty, err := st.EmptyWorkerTransfers(ctx)
	if err != nil {
		c.cfg.Logger.Warn("sweep transfers buckets", "err", err)
	}
	known := c.knownBuckets()
	unknown := map[string]bool{}
	var removed []string
	for _, b := range empty {
		switch _, ok := known[b]; {
		case ok:
		case !was[b]:
			unknown[b] = true
		default:
			if err := st.RemoveWorkerTransfers(ctx, b); err != nil {
				c.cfg.Logger.Warn("remove transfers bucket", "bucket", b, "err", err)
				unknown[b] = true
				continue
			}
			removed = append(removed, b)
			c.cfg.Logger.Info("removed the empty transfers bucket of a worker gone", "bucket", b)
		}
	}
	if len(removed) == 0 {
		return unknown
	}
	known = c.knownBuckets()
	for _, b := range removed {
		if id, ok := known[b]; ok {
			if err := st.OpenWorkerTransfers(ctx, id); err != nil {
				c.cfg.Logger.Warn("transfers bucket of a worker that joined not made again", "worker", id, "err", err)
			}
		}
	}
	return unknown
}
