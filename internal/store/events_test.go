package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/wire"
)

// publishEvent publishes e as coordinators and workers do: core NATS.
func publishEvent(t *testing.T, nc *nats.Conn, e event.Event) {
	t.Helper()
	msg := nats.NewMsg(wire.SubjectEvents(e.RunID) + "." + string(e.Type))
	msg.Header.Set(wire.HeaderRun, e.RunID)
	msg.Data, _ = event.Marshal(e)
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
}

// waitStored waits until the events stream holds n messages.
func waitStored(t *testing.T, s *Store, n uint64) {
	t.Helper()
	ctx := ctxT(t, 5*time.Second)
	for {
		st, err := s.js.Stream(ctx, EventsStream)
		if err == nil && st.CachedInfo().State.Msgs >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("events stream never held %d messages (%v)", n, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type seqEvent struct {
	seq uint64
	typ event.Type
}

func TestEventsReplayThenLive(t *testing.T) {
	s, nc := openStore(t, Config{})
	ctx := ctxT(t, 15*time.Second)
	ev := func(run string, typ event.Type, name string) event.Event {
		return event.Event{Type: typ, RunID: run, Name: name, Time: time.Now().UTC()}
	}
	publishEvent(t, nc, ev("run-a", event.RunStarted, ""))
	publishEvent(t, nc, ev("run-b", event.RunStarted, "")) // another run's
	publishEvent(t, nc, ev("run-a", event.ThreadSpawned, "x"))
	if err := nc.Publish(wire.SubjectEvents("run-a")+".garbage", []byte("junk")); err != nil {
		t.Fatal(err)
	}
	publishEvent(t, nc, ev("run-a", event.ThreadStarted, "x"))
	waitStored(t, s, 5)

	got := make(chan seqEvent, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Events(ctx, "run-a", 0, func(seq uint64, e event.Event) error {
			got <- seqEvent{seq, e.Type}
			return nil
		})
	}()
	var seen []seqEvent
	for range 3 { // the stored ones
		seen = append(seen, recv(t, got))
	}
	for _, typ := range []event.Type{event.ModelCall, event.ThreadFinished, event.RunFinished} {
		publishEvent(t, nc, ev("run-a", typ, "x"))
		publishEvent(t, nc, ev("run-b", typ, "x"))
	}
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
		if i > 0 && se.seq <= seen[i-1].seq {
			t.Fatalf("sequences not increasing: %v", seen)
		}
	}
	if d := cmp.Diff(wantTypes, types); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}

	// Resuming after the third event delivers only the later ones.
	var resumed []seqEvent
	err := s.Events(ctx, "run-a", seen[2].seq, func(seq uint64, e event.Event) error {
		resumed = append(resumed, seqEvent{seq, e.Type})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(seen[3:], resumed, cmp.AllowUnexported(seqEvent{})); d != "" {
		t.Fatalf("resumed (-want +got)\n%s", d)
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

	// Each Events call removed its consumer on the way out.
	st, err := s.js.Stream(ctx, EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n != 0 {
		t.Fatalf("%d consumers left on the events stream, want 0", n)
	}
}

// A run resumed after it finished: replay goes past the first execution's
// run.finished and ends at the last one.
func TestEventsOfAResumedRunEndAtTheLastFinish(t *testing.T) {
	s, nc := openStore(t, Config{})
	ctx := ctxT(t, 15*time.Second)
	ev := func(typ event.Type) event.Event {
		return event.Event{Type: typ, RunID: "run-r", Time: time.Now().UTC()}
	}
	for _, typ := range []event.Type{event.RunStarted, event.RunFinished, event.RunStarted, event.ThreadStarted} {
		publishEvent(t, nc, ev(typ))
	}
	waitStored(t, s, 4)

	got := make(chan seqEvent, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Events(ctx, "run-r", 0, func(seq uint64, e event.Event) error {
			got <- seqEvent{seq, e.Type}
			return nil
		})
	}()
	for range 4 {
		recv(t, got)
	}
	publishEvent(t, nc, ev(event.RunFinished))
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
