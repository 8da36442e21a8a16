package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The streams clients follow (the events, the records and the approvals)
// republish every message they store (their RePublish) under a tree of
// their own, formica.stored.<what>.<run or key>: the server's copy, with
// the stream's sequence (Nats-Sequence) and the sequence of the message
// before it on the same subject (Nats-Last-Sequence), and never the
// writer's reply subject, which a reader allowed to answer requests could
// use to forge the stream's ack. A follower subscribes there, reads what is
// stored by direct gets, then takes the copies as they come: no consumer,
// so a client needs no right to create one (see readDirect), and a
// watcher costs the server one subscription.
const (
	// storedEvents is where FORMICA_EVENTS republishes formica.eventlog.<run>,
	// as storedEvents.<run>.
	storedEvents = "formica.stored.events"
	// storedRuns is where the records bucket republishes a record, as
	// storedRuns.<run>.
	storedRuns = "formica.stored.runs"
	// storedApprovals is where the approvals bucket republishes an
	// approval, as storedApprovals.<id>.
	storedApprovals = "formica.stored.approvals"
)

// StoredSubjects are the trees the streams republish into: what a client
// subscribes to in order to follow runs, records and approvals.
var StoredSubjects = []string{storedEvents + ".>", storedRuns + ".>", storedApprovals + ".>"}

// republish copies what a stream stores on source (a pattern ending in
// ".>") to the same tokens under tree.
func republish(source, tree string) *jetstream.RePublish {
	return &jetstream.RePublish{Source: source, Destination: tree + ".>"}
}

// followIdle is how long a follower waits for a copy before it asks the
// stream anyway: a copy lost to a reconnect, a slow reader or a leader
// change, with no later copy to show the gap, is found then.
const followIdle = 5 * time.Second

// A follower delivers, in stream order and each once, the messages of a
// stream whose subject matches its filter: those stored after last, then
// each as the stream stores it.
type follower struct {
	s      *Store
	stream string
	// filter is one subject, or with whole every subject of the stream:
	// how a missed copy shows (see missed).
	filter string
	whole  bool
	// live is where the stream republishes what matches filter.
	live string
	// last is the sequence of the last message delivered, or the one
	// before where delivery starts.
	last uint64
	// ended: the last message delivered ends the follow unless a later
	// one is stored.
	ended bool
	// deliver takes each message, and says whether it ends the follow.
	deliver func(*storedMsg) (end bool, err error)
}

// subscribe listens for copies before anything is read, so that nothing
// stored after the read is missed.
func (f *follower) subscribe() (*nats.Subscription, error) { return f.s.nc.SubscribeSync(f.live) }

// run follows until a message that ends the follow is the last stored, or
// deliver fails (its error), or ctx ends (its cause), or the connection
// closes; then it unsubscribes sub (subscribe's).
func (f *follower) run(ctx context.Context, sub *nats.Subscription) error {
	defer sub.Unsubscribe()
	done, err := f.catchUp(ctx)
	for !done && err == nil {
		var m *nats.Msg
		m, err = nextWithin(ctx, sub, followIdle)
		switch {
		case errors.Is(err, errIdle):
			done, err = f.catchUp(ctx)
		case err == nil:
			done, err = f.copy(ctx, m)
		}
	}
	return withCause(ctx, err)
}

// catchUp delivers what is stored after the last message delivered, read
// by direct gets, and reports whether the follow is done: the last
// message delivered ends it and nothing is stored after it.
func (f *follower) catchUp(ctx context.Context) (bool, error) {
	err := f.s.readDirect(ctx, f.stream, f.filter, f.last+1, directBatch, f.take)
	return err == nil && f.ended, err
}

// copy takes a republished copy: it delivers it when no copy was missed
// since the last message delivered, and otherwise reads what was missed
// (and it) from the stream.
func (f *follower) copy(ctx context.Context, m *nats.Msg) (bool, error) {
	sm, err := storedFrom(m)
	if err != nil {
		f.s.log.Warn("store: skipping a republished message", "subject", m.Subject, "err", err)
		return false, nil
	}
	if sm.seq <= f.last { // read already
		return false, nil
	}
	if f.missed(sm.seq, m.Header) {
		done, err := f.catchUp(ctx)
		if done || err != nil || sm.seq <= f.last || f.missed(sm.seq, m.Header) {
			// Still missing (a replica behind the copy's answered): the
			// next copy, or the idle read, finds it.
			return done, err
		}
	}
	if err := f.take(sm); err != nil || !f.ended {
		return false, err
	}
	return f.catchUp(ctx) // the end, unless a later message is stored
}

// missed reports whether a message matching the filter was stored between
// the last one delivered and the copy of seq. On one subject the copy
// names the one before it there; on the whole stream every sequence is
// one.
func (f *follower) missed(seq uint64, hdr nats.Header) bool {
	if f.whole {
		return seq > f.last+1
	}
	prev, err := strconv.ParseUint(hdr.Get(jetstream.LastSequenceHeader), 10, 64)
	return err != nil || prev > f.last
}

// take delivers m.
func (f *follower) take(m *storedMsg) error {
	end, err := f.deliver(m)
	f.last, f.ended = m.seq, end
	return err
}

// errIdle reports that no copy came within followIdle.
var errIdle = errors.New("store: no copy within the idle time")

// nextWithin is sub's next message, errIdle after d without one.
func nextWithin(ctx context.Context, sub *nats.Subscription, d time.Duration) (*nats.Msg, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	m, err := sub.NextMsgWithContext(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, errIdle
	}
	return m, err
}
