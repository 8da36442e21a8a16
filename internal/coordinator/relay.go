package coordinator

import (
	"context"
	"fmt"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/wire"
)

// Workers never publish events. A hosted thread's events come to its run's
// coordinator on messages that carry the placement's token (progress, the
// result, spawn and approval requests), and the coordinator publishes them
// for the run's watchers: so every event on formica.events.<run>.> is one
// the coordinator vouched for.

// workerEventTypes are the events a worker's thread may report; the rest
// (run.*, thread.spawned, started, finished, ...) are the coordinator's own.
var workerEventTypes = map[event.Type]bool{
	event.ModelCall: true, event.ToolCall: true, event.ToolResult: true,
	event.ApprovalRequested: true, event.ApprovalResolved: true, event.ThreadHandoff: true,
}

// relay publishes events the placement of t reported, stamped with the
// thread as held here (run, id, parent, depth, name): a worker speaks only
// of the thread it was given, and only with the kinds of events it makes.
// subject names where they came from, for the log of refused ones.
func (c *Coordinator) relay(t *threadRec, events []event.Event, subject string) {
	th := &t.thread
	for i := range events {
		e := &events[i]
		if !workerEventTypes[e.Type] {
			c.refuse(subject, fmt.Errorf("a worker may not report %q events (thread %s)", e.Type, th.ID))
			continue
		}
		// Stamped in place: who the event is about is set here, and what no
		// event a worker reports has (status, worker) is cleared.
		e.RunID, e.ThreadID, e.ParentID, e.Depth, e.Name = th.RunID, th.ID, th.ParentID, th.Depth, th.Name
		e.Status, e.Worker = "", ""
		c.publish(*e)
	}
}

// publish queues e for the run's watchers (publisher); its time is the
// moment it was queued when it has none.
func (c *Coordinator) publish(e event.Event) {
	if e.Time.IsZero() {
		e.Time = c.cfg.Now()
	}
	c.events.put(e)
}

// eventSender publishes events as their JSON (event.AppendJSON), one at a
// time (the publisher's one draining goroutine): its buffer serves event
// after event, since a publish copies it.
type eventSender struct {
	c   *Coordinator
	buf []byte
}

// maxKeptEvent bounds the buffer kept for the next event.
const maxKeptEvent = 64 << 10

func (s *eventSender) send(e *event.Event) {
	subject := wire.EventSubject(*e)
	if s.c.cfg.Interest != nil && !s.c.cfg.Interest(subject) {
		return // nobody listens: NATS would drop it
	}
	data, err := event.AppendJSON(s.buf[:0], e)
	if err == nil {
		err = s.c.tr.Publish(context.Background(), subject, wire.EventMessage(data))
	}
	if cap(data) <= maxKeptEvent {
		s.buf = data[:0]
	} else {
		s.buf = nil
	}
	if err != nil {
		s.c.cfg.Logger.Warn("publish event", "type", e.Type, "err", err)
	}
}
