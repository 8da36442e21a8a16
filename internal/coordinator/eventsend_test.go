package coordinator

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/store"
)

// TestEventLogBatchesPerRun: a durable coordinator stores the events of
// each run in its log, in order, a batch of the publisher's per stored
// message (split at store.EventsPerBatch), whether or not anybody listens
// live; a flush returns once what came before it is stored.
func TestEventLogBatchesPerRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{JetStream: true, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var asked atomic.Int64
	c, st := durable(t, ctx, nc, func(string) bool { asked.Add(1); return false }) // nobody listens live
	live, err := nc.SubscribeSync("formica.events.>")
	if err != nil {
		t.Fatal(err)
	}

	const big, small = store.EventsPerBatch + 500, 10
	ev := func(run string, i int, last bool) event.Event {
		typ := event.ModelCall
		if last {
			typ = event.RunFinished
		}
		return event.Event{Type: typ, RunID: run, Name: fmt.Sprint(i)}
	}
	for i := range big {
		c.publish(ev("r1", i, i == big-1))
		if i < small {
			c.publish(ev("r2", i, i == small-1))
		}
	}
	if !c.events.flush(30 * time.Second) {
		t.Fatal("flush gave up")
	}
	// Stored already: the stream holds them before any reader asks.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, store.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n < 3 || n > 6 {
		t.Errorf("the events stream holds %d messages for %d events of two runs, want a few batches", n, big+small)
	}
	for run, n := range map[string]int{"r1": big, "r2": small} {
		next, last := 0, uint64(0)
		err := st.Events(ctx, run, 0, func(id uint64, e event.Event) error {
			if e.RunID != run || e.Name != fmt.Sprint(next) {
				return fmt.Errorf("event %d of %s is %s %s %s", next, run, e.RunID, e.Type, e.Name)
			}
			if id <= last {
				return fmt.Errorf("id %d after %d", id, last)
			}
			next, last = next+1, id
			return nil
		})
		if err != nil || next != n {
			t.Errorf("%s: %d of %d events replayed in order (%v)", run, next, n, err)
		}
	}
	if _, err := live.NextMsg(100 * time.Millisecond); err != nats.ErrTimeout {
		t.Errorf("an event was published live with nobody listening: %v", err)
	}
	if asked.Load() == 0 {
		t.Error("the coordinator never asked who listens")
	}
}

// TestEventBurstWaitsForTheStream: a burst of events far larger than the
// server's stream intake (which drops what overflows it; as small here as
// the coordinator's window of unacked batches) is all stored: batches wait
// for acks once the window is full.
func TestEventBurstWaitsForTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), DontListen: true, NoSigs: true,
		StreamMaxBufferedMsgs: storeWindow})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, st := durable(t, ctx, nc, nil)
	// Many runs at once: a publisher batch holds a stored message for each.
	const runs, per = 50, 1000
	for i := range per {
		for r := range runs {
			typ := event.ToolCall
			if i == per-1 {
				typ = event.RunFinished
			}
			c.publish(event.Event{Type: typ, RunID: fmt.Sprint("burst-", r), Name: fmt.Sprint(i), Arguments: `{"name":"a","task":"part of the burst"}`})
		}
	}
	if !c.events.flush(30 * time.Second) {
		t.Fatal("flush gave up")
	}
	for r := range runs {
		got := 0
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a run missing its end waits for it
		err = st.Events(rctx, fmt.Sprint("burst-", r), 0, func(_ uint64, e event.Event) error {
			if e.Name != fmt.Sprint(got) {
				return fmt.Errorf("event %d is %s", got, e.Name)
			}
			got++
			return nil
		})
		cancel()
		if err != nil || got != per {
			t.Fatalf("run %d: %d of %d events stored (%v)", r, got, per, err)
		}
	}
}

// durable opens the run store on nc and a coordinator over it, which asks
// interest who listens.
func durable(t *testing.T, ctx context.Context, nc *nats.Conn, interest func(string) bool) (*Coordinator, *store.Store) {
	t.Helper()
	st, err := store.Open(ctx, nc, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Conn: nc, Cwd: os.TempDir(), Store: st, Interest: interest})
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}
