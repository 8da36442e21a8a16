package store

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
)

// appendEvents stores events as one batch of their run's log, as a
// coordinator does, and waits until it is stored.
func appendEvents(t *testing.T, s *Store, run string, events ...event.Event) {
	t.Helper()
	var batch []byte
	for _, e := range events {
		data, err := event.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(append(batch, data...), '\n')
	}
	appendBatch(t, s, run, batch)
}

func appendBatch(t *testing.T, s *Store, run string, batch []byte) {
	t.Helper()
	f, err := s.AppendEvents(run, batch)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitStored(ctxT(t, 5*time.Second), []jetstream.PubAckFuture{f}); err != nil {
		t.Fatal(err)
	}
}

type seqEvent struct {
	id  uint64
	typ event.Type
}

func TestEventsReplayThenLive(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 15*time.Second)
	ev := func(run string, typ event.Type, name string) event.Event {
		return event.Event{Type: typ, RunID: run, Name: name, Time: time.Now().UTC()}
	}
	appendEvents(t, s, "run-a", ev("run-a", event.RunStarted, ""))
	appendEvents(t, s, "run-b", ev("run-b", event.RunStarted, "")) // another run's
	// A batch with a line that is no event: skipped, its place kept.
	spawned, _ := event.Marshal(ev("run-a", event.ThreadSpawned, "x"))
	started, _ := event.Marshal(ev("run-a", event.ThreadStarted, "x"))
	appendBatch(t, s, "run-a", append(append(append(spawned, "\njunk\n"...), started...), '\n'))

	got := make(chan seqEvent, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Events(ctx, "run-a", 0, func(id uint64, e event.Event) error {
			got <- seqEvent{id, e.Type}
			return nil
		})
	}()
	var seen []seqEvent
	for range 3 { // the stored ones
		seen = append(seen, recv(t, got))
	}
	noConsumers(t, s, "while Events follows a run")
	appendEvents(t, s, "run-a", ev("run-a", event.ModelCall, "x"), ev("run-a", event.ThreadFinished, "x"))
	appendEvents(t, s, "run-b", ev("run-b", event.RunFinished, "x"))
	appendEvents(t, s, "run-a", ev("run-a", event.RunFinished, "x"))
	for range 3 { // the live ones
		seen = append(seen, recv(t, got))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Events did not return after run.finished")
	}
	wantTypes := []event.Type{event.RunStarted, event.ThreadSpawned, event.ThreadStarted,
		event.ModelCall, event.ThreadFinished, event.RunFinished}
	var types []event.Type
	for i, se := range seen {
		types = append(types, se.typ)
		if i > 0 && se.id <= seen[i-1].id {
			t.Fatalf("ids not increasing: %v", seen)
		}
	}
	if d := cmp.Diff(wantTypes, types); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	// Ids are the batch's sequence and the place in it (the junk's counts).
	if seen[1].id+2 != seen[2].id || seen[3].id+1 != seen[4].id {
		t.Errorf("ids %v: places within a batch not kept", seen)
	}
	if last, err := s.LastEventID(ctx, "run-a"); err != nil || last != seen[5].id {
		t.Errorf("LastEventID = %d, %v; want %d", last, err, seen[5].id)
	}
	if last, err := s.LastEventID(ctx, "run-none"); err != nil || last != 0 {
		t.Errorf("LastEventID of a run with none = %d, %v; want 0", last, err)
	}

	// Resuming after any event delivers only the later ones, within a
	// batch too.
	for _, after := range []int{0, 1, 3} {
		var resumed []seqEvent
		err := s.Events(ctx, "run-a", seen[after].id, func(id uint64, e event.Event) error {
			resumed = append(resumed, seqEvent{id, e.Type})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(seen[after+1:], resumed, cmp.AllowUnexported(seqEvent{})); d != "" {
			t.Fatalf("resumed after event %d (-want +got)\n%s", after, d)
		}
	}

	// fn's error ends the stream.
	stop := errors.New("client went away")
	if err := s.Events(ctx, "run-a", 0, func(uint64, event.Event) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn error: %v", err)
	}
	// So does ctx, on a run with nothing (yet) to say.
	quiet, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := s.Events(quiet, "run-c", 0, func(uint64, event.Event) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx end: %v", err)
	}

	noConsumers(t, s, "after the Events calls")
}

// noConsumers fails t if the events stream has a consumer: Events reads
// without one.
func noConsumers(t *testing.T, s *Store, when string) {
	t.Helper()
	st, err := s.js.Stream(ctxT(t, 5*time.Second), EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n != 0 {
		t.Fatalf("%s: %d consumers on the events stream, want 0", when, n)
	}
}

// A run resumed after it finished: replay goes past the first execution's
// run.finished and ends at the last one.
func TestEventsOfAResumedRunEndAtTheLastFinish(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 15*time.Second)
	ev := func(typ event.Type) event.Event {
		return event.Event{Type: typ, RunID: "run-r", Time: time.Now().UTC()}
	}
	appendEvents(t, s, "run-r", ev(event.RunStarted), ev(event.RunFinished))
	appendEvents(t, s, "run-r", ev(event.RunStarted), ev(event.ThreadStarted))

	got := make(chan seqEvent, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Events(ctx, "run-r", 0, func(id uint64, e event.Event) error {
			got <- seqEvent{id, e.Type}
			return nil
		})
	}()
	for range 4 {
		recv(t, got)
	}
	appendEvents(t, s, "run-r", ev(event.RunFinished))
	if e := recv(t, got); e.typ != event.RunFinished {
		t.Fatalf("got %s, want the second run.finished", e.typ)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Events did not end at the last run.finished")
	}
}

// A client's store writes no events.
func TestClientStoreWritesNoEvents(t *testing.T) {
	_, nc := openStore(t, Config{})
	c, err := Open(ctxT(t, 10*time.Second), nc, Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendEvents("run-a", []byte("{}\n")); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a client's AppendEvents: %v, want refused", err)
	}
}

// FuzzEachEvent: whatever a stored batch holds, reading it never panics,
// and the ids it gives are increasing and the batch's own.
func FuzzEachEvent(f *testing.F) {
	line, _ := event.Marshal(event.Event{Type: event.RunStarted, RunID: "r"})
	f.Add(append(line, '\n'), 0)
	f.Add([]byte("junk\n\n{}\n"+string(line)), 1)
	f.Add([]byte(strings.Repeat("{}\n", EventsPerBatch+3)), 2)
	s := &Store{log: slog.New(slog.DiscardHandler)}
	const seq = 7
	f.Fuzz(func(t *testing.T, batch []byte, from int) {
		var last uint64
		err := s.eachEvent("r", seq, batch, from, func(id uint64, e event.Event) error {
			if id < EventID(seq, 0) || id >= EventID(seq+1, 0) || (last != 0 && id <= last) {
				t.Fatalf("id %d after %d, outside batch %d", id, last, seq)
			}
			last = id
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if last != 0 && last > EventID(seq, lastLine(batch)) {
			t.Fatalf("id %d past the batch's last line %d", last, lastLine(batch))
		}
	})
}
