package store

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
)

// The events stream keeps each run's events as its log: messages on
// formica.eventlog.<run>, each a batch of the run's events in order, one
// event's JSON per line (what the coordinator publishes live, one per
// message, on formica.events.<run>.<type>). A batch is what the coordinator
// sent together, within a millisecond or so: storing a run's events costs a
// stored message per batch, not per event, and each is stored with an ack,
// so the coordinator knows what was kept and a burst of events waits for
// the stream instead of overflowing its intake.
//
// An event's id (the HTTP API's SSE id) is its batch's stream sequence
// times EventsPerBatch plus its place in the batch: ids grow with the log,
// and one names the point to resume after.
const (
	// SubjectEventLogAll matches every run's event log.
	SubjectEventLogAll = "formica.eventlog.>"
	// EventsPerBatch bounds the events of one stored batch.
	EventsPerBatch = 1000
	// MaxEventBatch bounds the bytes of one stored batch.
	MaxEventBatch = 256 << 10
	// EventsMaxMsgBytes bounds one message of the events stream: a batch
	// (MaxEventBatch), or one event alone past it.
	EventsMaxMsgBytes = 1 << 20
	// eventLogMaxPending bounds the batches not yet acked: past it, a
	// publish waits briefly for acks, then fails.
	eventLogMaxPending = 1024
	// eventLogAckTimeout bounds the wait for one batch's ack.
	eventLogAckTimeout = 10 * time.Second
)

// EventLogContentType is a batch's content type: JSON lines.
const EventLogContentType = "application/jsonl"

// SubjectEventLog is where run's event batches are stored.
func SubjectEventLog(run string) string { return "formica.eventlog." + run }

// EventID is the id of the event at place i of the batch stored at seq.
func EventID(seq uint64, i int) uint64 { return seq*EventsPerBatch + uint64(i) }

// eventLogPublisher is the JetStream context of event batches: pipelined,
// each failure logged.
func (s *Store) eventLogPublisher(nc *nats.Conn) (jetstream.JetStream, error) {
	ejs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(eventLogMaxPending),
		jetstream.WithPublishAsyncTimeout(eventLogAckTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, msg *nats.Msg, err error) {
			s.log.Warn("store: events not stored", "subject", msg.Subject, "err", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("store: jetstream: %w", err)
	}
	return ejs, nil
}

// AppendEvents stores batch, the JSON lines of some of run's events in
// order (at most EventsPerBatch of them, MaxEventBatch bytes), as the next
// message of its log, without waiting: the future says when it is stored.
// The store keeps no reference to batch once it returns.
func (s *Store) AppendEvents(run string, batch []byte) (jetstream.PubAckFuture, error) {
	if s.ejs == nil {
		return nil, fmt.Errorf("%w: this store does not write events", ErrInvalidConfig)
	}
	msg := &nats.Msg{Subject: SubjectEventLog(run), Data: batch, Header: nats.Header{"Content-Type": {EventLogContentType}}}
	f, err := s.ejs.PublishMsgAsync(msg, jetstream.WithExpectStream(EventsStream))
	if err != nil {
		return nil, fmt.Errorf("store: events of run %s: %w", run, err)
	}
	return f, nil
}

// WaitStored waits for futures (AppendEvents'), each for at most its ack
// timeout, and returns the first error.
func WaitStored(ctx context.Context, futures []jetstream.PubAckFuture) error {
	var first error
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return first
}

// eachEvent calls fn with the id and the event of every line of the batch
// stored at seq, from place from on; a line that is not an event is logged
// and skipped (its place counts), and so are lines past EventsPerBatch,
// which would take ids of the next batch. It stops at fn's first error.
func (s *Store) eachEvent(run string, seq uint64, batch []byte, from int, fn func(id uint64, e event.Event) error) error {
	for i := 0; len(batch) > 0; i++ {
		if i == EventsPerBatch {
			s.log.Warn("store: skipping the events of a batch past its bound", "run", run, "seq", seq, "bound", EventsPerBatch)
			break
		}
		var line []byte
		line, batch, _ = bytes.Cut(batch, []byte("\n"))
		if i < from {
			continue
		}
		e, err := event.Unmarshal(line)
		if err != nil {
			s.log.Warn("store: skipping undecodable event", "run", run, "seq", seq, "place", i, "err", err)
			continue
		}
		if err := fn(EventID(seq, i), e); err != nil {
			return err
		}
	}
	return nil
}

// ending is what a batch of a run's events says of the run's end: whether
// it holds a run.finished, and whether it holds anything but events after
// the end (event.Type.AfterEnd: webhook calls), which a run that ended
// and is resumed would.
type ending struct {
	finished bool
	steps    bool
}

func (e *ending) add(t event.Type) {
	e.finished = e.finished || t == event.RunFinished
	e.steps = e.steps || !t.AfterEnd()
}

// ends says whether the run has ended once the batch is taken, given
// whether it had before: a batch with a run.finished ends it, a batch of
// nothing but events after the end leaves it ended, any other batch
// means it goes on (a resumed run's next execution).
func (e ending) ends(before bool) bool {
	return e.finished || (before && !e.steps)
}

// lastLine is the place of batch's last line (within the bound).
func lastLine(batch []byte) int {
	return min(bytes.Count(bytes.TrimSuffix(batch, []byte("\n")), []byte("\n")), EventsPerBatch-1)
}
