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
// oldest kept. It follows the run through Feeds of its own: a process
// serving many watchers shares one Feeds, one subscription per run for all
// of them.
func (s *Store) Events(ctx context.Context, runID string, after uint64, fn func(id uint64, e event.Event) error) error {
	h := s.NewFeeds(0)
	defer h.Close()
	return h.Events(ctx, runID, after, fn)
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
