package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
)

func feedEvent(run string, typ event.Type, name string) event.Event {
	return event.Event{Type: typ, RunID: run, Name: name, Time: time.Now().UTC()}
}

// openStoreOn starts a server and opens a store on it.
func openStoreOn(t *testing.T) (*Store, *broker.Server) {
	t.Helper()
	srv := brokertest.Start(t)
	s, err := Open(ctxT(t, 10*time.Second), connect(t, srv), Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

// listeners counts the subscriptions on srv that a message on subject
// reaches, once the server has read what s's connection sent.
func listeners(t *testing.T, s *Store, srv *broker.Server, subject string) int {
	t.Helper()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sz, err := srv.NATS().Subsz(&server.SubszOptions{Subscriptions: true, Test: subject})
	if err != nil {
		t.Fatal(err)
	}
	return sz.Total
}

// allEvents is every stored event of run, read without a feed.
func allEvents(t *testing.T, s *Store, run string) []seqEvent {
	t.Helper()
	var out []seqEvent
	if err := s.Replay(ctxT(t, 10*time.Second), run, 0, func(id uint64, e event.Event) error {
		out = append(out, seqEvent{id, e.Type})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Many watchers of a run share one subscription: each gets the stored
// events, then the live ones, each once and in order, and ends with the
// run; no consumer is made.
func TestFeedsShareOneFollowPerRun(t *testing.T) {
	s, srv := openStoreOn(t)
	ctx := ctxT(t, 30*time.Second)
	feeds := s.NewFeeds(0)
	defer feeds.Close()
	appendEvents(t, s, "run-a", feedEvent("run-a", event.RunStarted, ""))
	appendEvents(t, s, "run-a", feedEvent("run-a", event.ThreadSpawned, "x"), feedEvent("run-a", event.ThreadStarted, "x"))
	appendEvents(t, s, "run-b", feedEvent("run-b", event.RunStarted, ""))
	stored := allEvents(t, s, "run-a")
	live := storedEvents + ".run-a"

	const watchers = 20
	type result struct {
		after uint64
		got   []seqEvent
		err   error
	}
	results := make([]result, watchers)
	joined := make(chan struct{}, watchers)
	var wg sync.WaitGroup
	for i := range watchers {
		// Half from the start, half after the first stored event.
		after := uint64(0)
		if i%2 == 1 {
			after = stored[0].id
		}
		results[i].after = after
		wg.Go(func() {
			n := 0
			results[i].err = feeds.Events(ctx, "run-a", after, func(id uint64, e event.Event) error {
				results[i].got = append(results[i].got, seqEvent{id, e.Type})
				// A watcher that has a stored event has joined the feed.
				if n++; n == 1 {
					joined <- struct{}{}
				}
				return nil
			})
		})
	}
	for range watchers {
		recv(t, joined)
	}
	if n := feeds.Following(); n != 1 {
		t.Fatalf("%d runs followed, want 1", n)
	}
	if n := listeners(t, s, srv, live); n != 1 {
		t.Fatalf("%d subscriptions to %s for %d watchers of the run, want 1", n, live, watchers)
	}
	noConsumers(t, s, "while watchers follow a run")

	appendEvents(t, s, "run-a", feedEvent("run-a", event.ModelCall, "x"), feedEvent("run-a", event.ThreadFinished, "x"))
	appendEvents(t, s, "run-b", feedEvent("run-b", event.RunFinished, ""))
	appendEvents(t, s, "run-a", feedEvent("run-a", event.RunFinished, ""))
	wg.Wait()
	all := allEvents(t, s, "run-a")
	if len(all) != 6 {
		t.Fatalf("stored %v, want 6 events", all)
	}
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("watcher %d: %v", i, r.err)
		}
		want := all
		if r.after != 0 {
			want = all[1:]
		}
		if d := cmp.Diff(want, r.got, cmp.AllowUnexported(seqEvent{})); d != "" {
			t.Fatalf("watcher %d after %d (-want +got)\n%s", i, r.after, d)
		}
	}
	if n := feeds.Following(); n != 0 {
		t.Fatalf("%d runs still followed after the run ended", n)
	}
	if n := listeners(t, s, srv, live); n != 0 {
		t.Fatalf("%d subscriptions to %s left after the run ended", n, live)
	}
	noConsumers(t, s, "after the watchers")
}

// Watchers joining while the run's events are being stored get every
// event after their resume point, once, in order: the hand-over from the
// store to the feed loses and repeats nothing.
func TestFeedsJoinWhileEventsAreStored(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 60*time.Second)
	feeds := s.NewFeeds(4)
	defer feeds.Close()
	const run, batches, watchers = "run-j", 200, 40

	// Each watcher joins once the writer has stored a given batch, and
	// resumes after an event stored before it.
	type result struct {
		after uint64
		got   []seqEvent
		err   error
	}
	results := make([]result, watchers)
	stored := make(chan uint64, batches) // the first event id of each batch stored
	var wg sync.WaitGroup
	starts := make([]chan uint64, watchers)
	for i := range watchers {
		starts[i] = make(chan uint64, 1)
		wg.Go(func() {
			after, ok := <-starts[i]
			if !ok {
				return
			}
			results[i].after = after
			results[i].err = feeds.Events(ctx, run, after, func(id uint64, e event.Event) error {
				results[i].got = append(results[i].got, seqEvent{id, e.Type})
				return nil
			})
		})
	}
	go func() {
		defer close(stored)
		for b := range batches {
			typ := event.ModelCall
			if b == batches-1 {
				typ = event.RunFinished
			}
			f, err := s.AppendEvents(run, batchOf(run, event.ToolCall, typ))
			if err != nil {
				t.Errorf("batch %d: %v", b, err)
				return
			}
			select {
			case ack := <-f.Ok():
				stored <- EventID(ack.Sequence, 0)
			case err := <-f.Err():
				t.Errorf("batch %d: %v", b, err)
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	// Watcher i joins after batch i*batches/watchers/2 is stored: the
	// first half of the run; resume points alternate between the start,
	// an event's first line and its second.
	n := 0
	for id := range stored {
		for i := range watchers {
			if n == i*batches/watchers/2 {
				switch i % 3 {
				case 0:
					starts[i] <- 0
				case 1:
					starts[i] <- id
				case 2:
					starts[i] <- id + 1
				}
			}
		}
		n++
	}
	for i := range watchers {
		close(starts[i])
	}
	wg.Wait()
	t.Logf("watchers let go for a full buffer: %d", feeds.Dropped())
	all := allEvents(t, s, run)
	if len(all) != 2*batches {
		t.Fatalf("stored %d events, want %d", len(all), 2*batches)
	}
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("watcher %d: %v", i, r.err)
		}
		want := all
		for len(want) > 0 && want[0].id <= r.after {
			want = want[1:]
		}
		if d := cmp.Diff(want, r.got, cmp.AllowUnexported(seqEvent{})); d != "" {
			t.Fatalf("watcher %d after %d (-want +got)\n%s", i, r.after, d)
		}
	}
}

// batchOf is one stored batch of run's events of types.
func batchOf(run string, types ...event.Type) []byte {
	var b []byte
	for _, typ := range types {
		line, _ := event.Marshal(feedEvent(run, typ, "x"))
		b = append(append(b, line...), '\n')
	}
	return b
}

// A watcher that does not keep up holds back no other: the feed lets it
// go when its buffer is full, and it catches up from the store, missing
// nothing.
func TestFeedsSlowWatcherCatchesUpFromTheStore(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 30*time.Second)
	feeds := s.NewFeeds(2)
	defer feeds.Close()
	const run, batches = "run-s", 12
	appendEvents(t, s, run, feedEvent(run, event.RunStarted, ""))

	// The slow watcher takes the first event, then waits for release.
	release := make(chan struct{})
	slowJoined := make(chan struct{})
	var slow []seqEvent
	slowDone := make(chan error, 1)
	go func() {
		slowDone <- feeds.Events(ctx, run, 0, func(id uint64, e event.Event) error {
			slow = append(slow, seqEvent{id, e.Type})
			if len(slow) == 1 {
				close(slowJoined)
				<-release
			}
			return nil
		})
	}()
	<-slowJoined
	var fast []seqEvent
	fastJoined := make(chan struct{})
	fastDone := make(chan error, 1)
	go func() {
		fastDone <- feeds.Events(ctx, run, 0, func(id uint64, e event.Event) error {
			if fast = append(fast, seqEvent{id, e.Type}); len(fast) == 1 {
				close(fastJoined)
			}
			return nil
		})
	}()
	<-fastJoined
	for b := range batches {
		typ := event.ModelCall
		if b == batches-1 {
			typ = event.RunFinished
		}
		appendEvents(t, s, run, feedEvent(run, typ, "x"))
	}
	// The fast watcher ends with the run while the slow one still waits.
	if err := <-fastDone; err != nil {
		t.Fatal(err)
	}
	all := allEvents(t, s, run)
	if d := cmp.Diff(all, fast, cmp.AllowUnexported(seqEvent{})); d != "" {
		t.Fatalf("fast watcher (-want +got)\n%s", d)
	}
	// The slow one was let go (the fast one may have been too, if it fell
	// two batches behind: it caught up as well).
	if n := feeds.Dropped(); n < 1 {
		t.Fatal("the slow watcher was not let go")
	}
	close(release)
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(all, slow, cmp.AllowUnexported(seqEvent{})); d != "" {
		t.Fatalf("slow watcher (-want +got)\n%s", d)
	}
	if n := feeds.Following(); n != 0 {
		t.Fatalf("%d runs still followed", n)
	}
}

// A watcher whose ctx ends leaves, and the last one to leave stops the
// feed; closing the feeds ends their watchers.
func TestFeedsLeaveAndClose(t *testing.T) {
	s, srv := openStoreOn(t)
	ctx := ctxT(t, 30*time.Second)
	feeds := s.NewFeeds(0)
	appendEvents(t, s, "run-q", feedEvent("run-q", event.RunStarted, ""))

	wctx, cancel := context.WithCancelCause(ctx)
	gone := errors.New("client went away")
	joined := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- feeds.Events(wctx, "run-q", 0, func(uint64, event.Event) error { close(joined); return nil })
	}()
	<-joined
	cancel(gone)
	if err := <-done; !errors.Is(err, gone) {
		t.Fatalf("Events after ctx ended: %v, want its cause", err)
	}
	if n, subs := feeds.Following(), listeners(t, s, srv, storedEvents+".run-q"); n != 0 || subs != 0 {
		t.Fatalf("after the last watcher left: %d runs followed, %d subscriptions", n, subs)
	}

	joined2 := make(chan struct{})
	go func() {
		done <- feeds.Events(ctx, "run-q", 0, func(uint64, event.Event) error { close(joined2); return nil })
	}()
	<-joined2
	feeds.Close()
	if err := <-done; !errors.Is(err, ErrFeedsClosed) {
		t.Fatalf("Events after Close: %v, want ErrFeedsClosed", err)
	}
	if err := feeds.Events(ctx, "run-q", 0, func(uint64, event.Event) error { return nil }); !errors.Is(err, ErrFeedsClosed) {
		t.Fatalf("Events on closed feeds: %v", err)
	}
	if err := feeds.Events(ctx, "bad id!", 0, nil); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("bad run id: %v", err)
	}
}

// Dropped is how many times a watcher was let go for a full buffer (and
// caught up from the store).
func (h *Feeds) Dropped() int64 { return h.dropped.Load() }
