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
