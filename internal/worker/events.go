package worker

import (
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/wire"
)

// A worker never publishes events itself: the run's coordinator is their
// only publisher, and it publishes a thread's events only when they came
// with the thread's placement token. A hosted thread's events wait in its
// outbox and travel on the next message the worker sends the coordinator
// about the thread anyway: a spawn or approval request, the progress of
// each heartbeat, or the result. So they cost no message of their own,
// except when an outbox fills between two heartbeats.
const (
	// outboxMaxEvents and outboxMaxBytes bound what an outbox holds before
	// it is sent early, in a progress message of its own.
	outboxMaxEvents = 256
	outboxMaxBytes  = 128 << 10
	// eventOverhead estimates an event's encoded size besides its texts.
	eventOverhead = 256
)

// addEvent keeps e for the thread's next message; a full outbox is sent at
// once. Events after the result are dropped.
func (h *hosted) addEvent(e event.Event) {
	size := eventOverhead + len(e.Arguments) + len(e.Output) + len(e.Reason)
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	if h.ended {
		return
	}
	if len(h.events) > 0 && h.eventBytes+size > outboxMaxBytes {
		h.progressLocked()
	}
	h.events = append(h.events, e)
	h.eventBytes += size
	if len(h.events) >= outboxMaxEvents || h.eventBytes >= outboxMaxBytes {
		h.progressLocked()
	}
}

// takeEvents empties the outbox into a message the caller sends now.
func (h *hosted) takeEvents() []event.Event {
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	return h.takeEventsLocked()
}

func (h *hosted) takeEventsLocked() []event.Event {
	es := h.events
	h.events, h.eventBytes = nil, 0
	return es
}

// progress tells the coordinator the thread goes on, with whatever events
// wait, unless its result is on its way.
func (h *hosted) progress() {
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	if !h.ended {
		h.progressLocked()
	}
}

// progressLocked sends progress with the waiting events.
func (h *hosted) progressLocked() {
	h.reply.Reply(wire.Message(wire.TypeProgress, wire.Progress{ThreadID: h.thread.ID, Token: h.token, Events: h.takeEventsLocked()}))
}

// end marks the result as on its way and takes the events left for it;
// later events and progress are dropped.
func (h *hosted) end() []event.Event {
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	h.ended = true
	return h.takeEventsLocked()
}

// eventSink keeps the runner's events of each hosted thread in its outbox.
// The runner makes no thread.started or thread.finished for a thread it is
// given (RunThread): they are the coordinator's alone, since only it knows
// where a thread runs and how it ended (a placement it gave up on may still
// end here later).
type eventSink Worker

func (s *eventSink) Emit(e event.Event) {
	if h := (*Worker)(s).hostedThread(e.ThreadID); h != nil {
		// Who the event is about is the coordinator's to say: it stamps
		// the thread it placed here on every event that comes.
		e.RunID, e.ThreadID, e.ParentID, e.Depth, e.Name = "", "", "", 0, ""
		h.addEvent(e)
	}
}

// takeEvents empties thread id's outbox for a request about to be sent.
func (w *Worker) takeEvents(id string) []event.Event {
	if h := w.hostedThread(id); h != nil {
		return h.takeEvents()
	}
	return nil
}

func (w *Worker) hostedThread(id string) *hosted {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.threads[id]
}
