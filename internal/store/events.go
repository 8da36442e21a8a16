package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
)

// Events calls fn with each event of run runID whose id (EventID) is above
// after, in order: first the stored ones, then live ones as they are
// stored. It returns nil after delivering the batch that holds the run's
// last stored run.finished event (a resumed run has one per execution),
// fn's error if fn fails, or ctx's cause when ctx ends. The id is the
// event's stable id (the HTTP API's SSE id): to resume, pass the last id
// seen as after.
//
// One ordered consumer does both replay and live delivery, so no event
// falls between them; it recreates itself after a reconnect or a gap. A
// line that does not decode as an event is logged and skipped. Events
// older than EventsMaxAge are gone: replay starts at the oldest kept.
func (s *Store) Events(ctx context.Context, runID string, after uint64, fn func(id uint64, e event.Event) error) error {
	if err := checkID(runID); err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{SubjectEventLog(runID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	fromSeq, fromPlace := splitEventID(after)
	if after > 0 {
		fromPlace++ // after the event named, in its batch
		if fromSeq > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, fromSeq
		}
	}
	cons, err := s.js.OrderedConsumer(ctx, EventsStream, cfg)
	if err != nil {
		return fmt.Errorf("store: events of run %s: %w", runID, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("store: events of run %s: %w", runID, err)
	}
	defer s.stopOrdered(ctx, cons, it)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("store: events of run %s: %w", runID, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			s.log.Warn("store: events without metadata", "run", runID, "err", err)
			continue
		}
		seq, from := meta.Sequence.Stream, 0
		if seq == fromSeq {
			from = fromPlace
		}
		finished, err := s.eachEvent(runID, seq, msg.Data(), from, fn)
		if err != nil {
			return err
		}
		// A run resumed after it finished has a later attempt's events
		// after this run.finished: only the last one ends the run.
		if finished && meta.NumPending == 0 {
			return nil
		}
	}
}

// LastEventID returns the id of run runID's last stored event, or 0 when
// the stream keeps none.
func (s *Store) LastEventID(ctx context.Context, runID string) (uint64, error) {
	if err := checkID(runID); err != nil {
		return 0, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	st, err := s.js.Stream(ctx, EventsStream)
	if err != nil {
		return 0, fmt.Errorf("store: events of run %s: %w", runID, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, SubjectEventLog(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: last event of run %s: %w", runID, err)
	}
	return EventID(m.Sequence, lastLine(m.Data)), nil
}

// stopOrdered stops the iterator and deletes the ephemeral consumer at
// once rather than leaving it to the server's inactivity timeout (5 min),
// so dashboards that come and go do not pile up consumers.
func (s *Store) stopOrdered(ctx context.Context, cons jetstream.Consumer, it jetstream.MessagesContext) {
	it.Stop()
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = s.js.DeleteConsumer(ctx, EventsStream, info.Name)
}
