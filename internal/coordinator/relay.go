package coordinator

import (
	"fmt"

	"github.com/formica-run/formica/internal/event"
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
	event.ModelWaiting: true,
}

// relay publishes events the placement of t, a thread of run rn, reported,
// stamped with the thread as held here (run, id, parent, depth, name): a
// worker speaks only of the thread it was given, and only with the kinds of
// events it makes. subject names where they came from, for the log of
// refused ones. Of these events the run's record keeps only the calls found
// in doubt (a tool.result in_doubt): the rest it learns from the thread's
// result.
func (c *Coordinator) relay(rn *run, t *threadRec, events []event.Event, subject string) {
	th := &t.thread
	if len(events) > 0 {
		t.active.touch()
	}
	for i := range events {
		e := &events[i]
		if !workerEventTypes[e.Type] {
			c.refuse(subject, fmt.Errorf("a worker may not report %q events (thread %s)", e.Type, th.ID))
			continue
		}
		// Stamped in place: who the event is about is set here, and what no
		// event a worker reports has (status, worker) is cleared.
		e.RunID, e.ThreadID, e.ParentID, e.Depth, e.Name = th.RunID, th.ID, th.ParentID, th.Depth, th.Name
		status := e.Status
		e.Status, e.Worker = "", ""
		if e.Type == event.ModelWaiting && (status == event.Waiting || status == event.Running) {
			e.Status = status // a quota wait begins or ends
		}
		if e.Type == event.ToolResult && e.InDoubt {
			rn.rec.Emit(*e)
		}
		c.publish(*e)
	}
}

// publish queues e for the run's watchers (publisher); its time is the
// moment it was queued when it has none. An event of a run this
// coordinator no longer holds is dropped (acting).
func (c *Coordinator) publish(e event.Event) {
	if rn := c.run(e.RunID); rn != nil && !rn.acting() {
		return
	}
	if e.Time.IsZero() {
		e.Time = c.cfg.Now()
	}
	c.events.put(e)
}
