package coordinator

import (
	"context"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// Bodies over the NATS max payload travel through the transfers stream,
// each party's under places of its own (see store.PutPayload): a worker
// writes only in its own, and a message from a worker is read only from
// that worker's place; a body sent to a worker goes into the place where
// it reads what the coordinators send it.

// senderOf is the coordinator's natstransport.Config.Sender: the worker a
// message came from (the last token of the subjects it serves for workers,
// pinned to the sender by its credentials; the worker a placement was sent
// to, for that placement's replies), whose place alone its references may
// name. Messages on other subjects (clients', coordinators') carry none.
func senderOf(subject string) string {
	if strings.HasPrefix(subject, wire.WorkerSubjectPrefix) {
		return placeOf(store.WorkerPlace, wire.WorkerUnder(wire.WorkerSubjectPrefix, subject))
	}
	if rest, ok := strings.CutPrefix(subject, "formica.coord."); ok && strings.Count(rest, ".") == 2 {
		if id := wire.SenderOf(subject); id != wire.AnyWorker {
			return placeOf(store.WorkerPlace, id)
		}
	}
	return ""
}

// recipientOf is the coordinator's natstransport.Config.Recipient: a body
// sent to a worker (on its subjects, or in a reply to its inbox) goes into
// the place where that worker reads what it is sent, and no other worker
// does; any other into the coordinators' own.
func recipientOf(subject string) string {
	for _, prefix := range []string{wire.WorkerSubjectPrefix, wire.WorkerInboxPrefix} {
		if strings.HasPrefix(subject, prefix) {
			return placeOf(store.ToWorkerPlace, wire.WorkerUnder(prefix, subject))
		}
	}
	return ""
}

// placeOf is place(id), or "" for no worker.
func placeOf(place func(string) string, id string) string {
	if id == "" {
		return ""
	}
	return place(id)
}

// transfersSweepTimeout bounds one sweep of the transfers buckets of
// earlier versions.
const transfersSweepTimeout = time.Minute

// sweepTransfers removes the transfers buckets of earlier versions (a
// stream per worker) once nothing is left in them: at start, then once per
// Config.TransfersSweep until none is left.
func (c *Coordinator) sweepTransfers() {
	c.every(c.cfg.TransfersSweep, true, func() bool {
		ctx, cancel := context.WithTimeout(c.background, transfersSweepTimeout)
		removed, left, err := c.cfg.Store.RemoveDrainedTransfers(ctx)
		cancel()
		if len(removed) > 0 {
			c.cfg.Logger.Info("removed the drained transfers buckets of an earlier version", "buckets", removed, "left", left)
		}
		if err != nil {
			c.cfg.Logger.Warn("sweep the transfers buckets of an earlier version", "err", err)
		}
		return err != nil || left != 0
	})
}
