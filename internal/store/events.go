package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/wire"
)

// Events calls fn with each event of run runID whose sequence in
// EventsStream is above afterSeq, in order: first the stored ones, then
// live ones as they are published. It returns nil after delivering the
// run's last stored run.finished event (a resumed run has one per
// execution), fn's error if fn fails, or ctx's cause when ctx
// ends. The sequence is the event's stable id (the HTTP API's SSE id): to
// resume, pass the last sequence seen as afterSeq.
//
// One ordered consumer does both replay and live delivery, so no event
// falls between them; it recreates itself after a reconnect or a gap. A
// message that does not decode as an event is logged and skipped. Events
// older than EventsMaxAge are gone: replay starts at the oldest kept.
func (s *Store) Events(ctx context.Context, runID string, afterSeq uint64, fn func(seq uint64, e event.Event) error) error {
	if err := checkID(runID); err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{wire.SubjectEvents(runID) + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if afterSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, afterSeq+1
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
			s.log.Warn("store: event without metadata", "run", runID, "err", err)
			continue
		}
		e, err := event.Unmarshal(msg.Data())
		if err != nil {
			s.log.Warn("store: skipping undecodable event", "run", runID, "seq", meta.Sequence.Stream, "subject", msg.Subject(), "err", err)
			continue
		}
		if err := fn(meta.Sequence.Stream, e); err != nil {
			return err
		}
		// A run resumed after it finished has a later attempt's events
		// after this run.finished: only the last one ends the run.
		if e.Type == event.RunFinished && meta.NumPending == 0 {
			return nil
		}
	}
}

// LastEventSeq returns the sequence in EventsStream of run runID's last
// event of type typ, or 0 when the stream keeps none.
func (s *Store) LastEventSeq(ctx context.Context, runID string, typ event.Type) (uint64, error) {
	if err := checkID(runID); err != nil {
		return 0, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	st, err := s.js.Stream(ctx, EventsStream)
	if err != nil {
		return 0, fmt.Errorf("store: events of run %s: %w", runID, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, wire.SubjectEvents(runID)+"."+string(typ))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: last %s of run %s: %w", typ, runID, err)
	}
	return m.Sequence, nil
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
