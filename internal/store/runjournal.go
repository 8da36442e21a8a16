package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/journal"
)

// RunJournal is the coordinator's writer of one run's journals: the
// placements, spawns, refusals and ends it journals on the run's threads
// (their .c subjects). Append publishes without waiting; Sync waits until
// everything appended so far is stored. JetStream stores what one
// connection sends to a stream in the order it was sent, so the ack of the
// latest write stands for every write before it: a RunJournal keeps that
// one future, however many threads the run has. It is safe for concurrent
// use.
type RunJournal struct {
	s   *Store
	run string

	mu   sync.Mutex
	last jetstream.PubAckFuture // the latest write not yet synced
}

// RunJournal returns the coordinator's journal writer of run.
func (s *Store) RunJournal(run string) *RunJournal { return &RunJournal{s: s, run: run} }

// Append journals e on thread's coordinator subject, without waiting.
// placement is the token of the placement a KindPlacement entry journals
// (its digest goes with the entry, so the thread's own entries under it
// count on replay); other entries pass "". A write that fails is logged and
// counted (Config.JournalFailed).
func (j *RunJournal) Append(thread, placement string, e journal.Entry) {
	data, err := j.s.encodeEntry(e)
	subject := SubjectJournal(j.run, thread, true)
	if err != nil {
		j.s.journalFailed(&nats.Msg{Subject: subject}, err)
		return
	}
	digest := journal.Digest(placement)
	// Published and remembered under one lock: the future kept is that of
	// the write sent last.
	j.mu.Lock()
	defer j.mu.Unlock()
	if f, err := j.s.publishEntry(subject, digest, data); err == nil {
		j.last = f
	}
}

// Sync waits, at most journalAckTimeout (the write's own ack timeout),
// until every entry appended so far is stored, and reports the latest
// write's failure if it failed.
func (j *RunJournal) Sync(ctx context.Context) error {
	j.mu.Lock()
	f := j.last
	j.last = nil
	j.mu.Unlock()
	if f == nil {
		return nil
	}
	if err := WaitStored(ctx, []jetstream.PubAckFuture{f}); err != nil {
		return fmt.Errorf("store: journal of %s: %w", j.run, err)
	}
	return nil
}
