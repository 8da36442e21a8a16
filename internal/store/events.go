package store

import (
	"context"
	"errors"
	"fmt"

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
// It creates no consumer (see follower): it listens for the batches the
// events stream republishes for the run, reads the stored ones by direct
// gets, then delivers each copy, reading from the stream whatever copies
// it missed (after a reconnect, say), so no event falls between replay
// and live delivery. A line that does not decode as an event is logged and
// skipped. Events older than EventsMaxAge are gone: replay starts at the
// oldest kept. A process serving many watchers follows runs through Feeds,
// one subscription per run for all of them.
func (s *Store) Events(ctx context.Context, runID string, after uint64, fn func(id uint64, e event.Event) error) error {
	if err := checkID(runID); err != nil {
		return err
	}
	w := &watcher{s: s, run: runID, fn: fn, lastID: after, next: max(after/EventsPerBatch, 1)}
	f := &follower{s: s, stream: EventsStream, filter: SubjectEventLog(runID), live: storedEvents + "." + runID,
		last: w.next - 1,
		deliver: func(m *storedMsg) (bool, error) {
			// A run resumed after it finished has a later attempt's events
			// after this run.finished: only the last one ends the run. The
			// events of its webhook calls, also after it, do not reopen it.
			err := w.take(s.decodeBatch(runID, m))
			return w.ended, err
		}}
	sub, err := f.subscribe()
	if err != nil {
		return fmt.Errorf("store: events of run %s: %w", runID, err)
	}
	return f.run(ctx, sub)
}

// LastEventID returns the id of run runID's last stored event, or 0 when
// the stream keeps none.
func (s *Store) LastEventID(ctx context.Context, runID string) (uint64, error) {
	id, _, err := s.LastEvent(ctx, runID)
	return id, err
}

// LastEvent returns run runID's last stored event and its id, or 0 when
// the stream keeps none.
func (s *Store) LastEvent(ctx context.Context, runID string) (uint64, event.Event, error) {
	if err := checkID(runID); err != nil {
		return 0, event.Event{}, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	st, err := s.js.Stream(ctx, EventsStream)
	if err != nil {
		return 0, event.Event{}, fmt.Errorf("store: events of run %s: %w", runID, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, SubjectEventLog(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, event.Event{}, nil
	}
	if err != nil {
		return 0, event.Event{}, fmt.Errorf("store: last event of run %s: %w", runID, err)
	}
	i := lastLine(m.Data)
	var last event.Event
	err = s.eachEvent(runID, m.Sequence, m.Data, i, func(_ uint64, e event.Event) error { last = e; return nil })
	return EventID(m.Sequence, i), last, err
}
