package coordinator

import (
	"cmp"
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// eventSender sends events for the publisher's one draining goroutine: each
// live, as its JSON (event.Marshal) on formica.events.<run>.<type>, when
// anybody listens; and, with a store, into its run's log, the events
// stream, where the events a batch of the publisher brings for one run are
// stored as one message (store.AppendEvents), acked before the next batch
// is taken (stored).
type eventSender struct {
	c *Coordinator
	// logs are the runs' log batches being filled, in the order they began.
	logs    []*runLog
	byRun   map[string]*runLog
	pending []jetstream.PubAckFuture
}

// runLog is the batch of one run's events being filled: JSON lines.
type runLog struct {
	run   string
	lines []byte
	n     int
}

// storedWait bounds how long one batch of the publisher waits for the
// events stream's acks: past it, the batch is left to be acked or reported
// failed on its own, and the events go on, so a stream that does not
// answer slows the coordinator's events but never stops them.
const storedWait = 2 * time.Second

// storeWindow bounds the stored messages sent and not yet acked: a
// publisher batch with more (one per run, more for a run with many events)
// waits for their acks on the way, so what waits in the stream's intake
// (which drops what overflows it) stays this small.
const storeWindow = 16

func newEventSender(c *Coordinator) *eventSender {
	return &eventSender{c: c, byRun: map[string]*runLog{}}
}

func (s *eventSender) send(e *event.Event) {
	subject := wire.EventSubject(*e)
	live := s.c.cfg.Interest == nil || s.c.cfg.Interest(subject)
	keep := s.c.cfg.Store != nil
	if !live && !keep {
		return // nobody listens and nothing keeps it: NATS would drop it
	}
	data, err := event.Marshal(*e)
	if err != nil {
		s.c.cfg.Logger.Warn("publish event", "type", e.Type, "err", err)
		return
	}
	if live {
		if err := s.c.tr.Publish(context.Background(), subject, wire.EventMessage(data)); err != nil {
			s.c.cfg.Logger.Warn("publish event", "type", e.Type, "err", err)
		}
	}
	if keep {
		s.log(cmp.Or(e.RunID, wire.ClusterRun), data)
	}
}

// log adds an event's JSON to its run's batch, storing the batch first
// when the event would take it past its bounds.
func (s *eventSender) log(run string, data []byte) {
	l := s.byRun[run]
	if l == nil {
		l = &runLog{run: run}
		s.byRun[run] = l
		s.logs = append(s.logs, l)
	}
	if l.n > 0 && (l.n >= store.EventsPerBatch || len(l.lines)+len(data)+1 > store.MaxEventBatch) {
		s.store(l)
	}
	l.lines = append(append(l.lines, data...), '\n')
	l.n++
}

// store sends l's batch to the events stream and starts a new one.
func (s *eventSender) store(l *runLog) {
	if len(s.pending) >= storeWindow {
		s.waitStored()
	}
	f, err := s.c.cfg.Store.AppendEvents(l.run, l.lines)
	if err != nil {
		s.c.cfg.Logger.Warn("store events", "run_id", l.run, "events", l.n, "err", err)
	} else {
		s.pending = append(s.pending, f)
	}
	l.lines, l.n = nil, 0 // the publish may keep its message: a new buffer
}

// stored sends every batch being filled and waits, up to storedWait, until
// the events stream has acked all it was sent.
func (s *eventSender) stored() {
	if s.c.cfg.Store == nil {
		return
	}
	for _, l := range s.logs {
		if l.n > 0 {
			s.store(l)
		}
		delete(s.byRun, l.run)
	}
	clear(s.logs)
	s.logs = s.logs[:0]
	s.waitStored()
}

// waitStored waits, up to storedWait, until the events stream has acked
// every batch sent.
func (s *eventSender) waitStored() {
	if len(s.pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storedWait)
	err := store.WaitStored(ctx, s.pending)
	cancel()
	if err != nil {
		s.c.cfg.Logger.Warn("store events", "batches", len(s.pending), "err", err)
	}
	clear(s.pending)
	s.pending = s.pending[:0]
}
