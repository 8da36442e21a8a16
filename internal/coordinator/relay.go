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
}

// relay publishes events the placement of t reported, stamped with the
// thread as held here (run, id, parent, depth, name): a worker speaks only
// of the thread it was given, and only with the kinds of events it makes.
// subject names where they came from, for the log of refused ones.
func (c *Coordinator) relay(t *threadRec, events []event.Event, subject string) {
	for _, e := range events {
		if !workerEventTypes[e.Type] {
			c.refuse(subject, fmt.Errorf("a worker may not report %q events (thread %s)", e.Type, t.thread.ID))
			continue
		}
		stamped := threadEvent(e.Type, t.thread)
		stamped.Time, stamped.Reason, stamped.Model, stamped.Usage, stamped.Latency = e.Time, e.Reason, e.Model, e.Usage, e.Latency
		stamped.Tool, stamped.CallID, stamped.Arguments, stamped.Output, stamped.Decision = e.Tool, e.CallID, e.Arguments, e.Output, e.Decision
		c.publish(stamped)
	}
}
