package store_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// withStore runs f against a store on a throwaway embedded server.
func withStore(f func(ctx context.Context, nc *nats.Conn, st *store.Store) error) {
	dir, err := os.MkdirTemp("", "formica-store-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{JetStream: true, DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	st, err := store.Open(ctx, nc, store.Config{})
	if err == nil {
		err = f(ctx, nc, st)
	}
	if err != nil {
		fmt.Println(err)
	}
}

// A client submits a run; a coordinator takes it, keeps it in progress
// while it runs, stores the record, and only then acks it.
func Example() {
	withStore(func(ctx context.Context, _ *nats.Conn, st *store.Store) error {
		dup, err := st.Enqueue(ctx, wire.RunSubmit{RunID: "run-1", Task: "say hello"})
		if err != nil {
			return err
		}
		fmt.Println("duplicate:", dup)

		sub, err := st.Next(ctx)
		if err != nil {
			return err
		}
		stop := st.KeepInProgress(ctx, sub)
		rec, err := st.UpdateRecord(ctx, sub.Sub.RunID, func(r *record.Run) error {
			r.Status, r.Output, r.Attempts = event.Succeeded, "hello", int(sub.Delivered())
			return nil
		})
		stop()
		if err != nil {
			return err
		}
		if err := sub.Ack(ctx); err != nil {
			return err
		}
		fmt.Println(rec.RunID, rec.Status, rec.Output, rec.Attempts)
		return nil
	})
	// Output:
	// duplicate: false
	// run-1 succeeded hello 1
}

// Following a run's events as the HTTP API's SSE stream does: a stored
// batch's sequence and the event's place in it make the event id a client
// resumes from.
func ExampleStore_Events() {
	withStore(func(ctx context.Context, nc *nats.Conn, st *store.Store) error {
		// A coordinator stores a run's events in batches, JSON lines.
		var batch []byte
		for _, typ := range []event.Type{event.RunStarted, event.ThreadSpawned, event.RunFinished} {
			data, err := event.Marshal(event.Event{Type: typ, RunID: "run-1"})
			if err != nil {
				return err
			}
			batch = append(append(batch, data...), '\n')
		}
		f, err := st.AppendEvents("run-1", batch)
		if err != nil {
			return err
		}
		if err := store.WaitStored(ctx, []jetstream.PubAckFuture{f}); err != nil {
			return err
		}
		return st.Events(ctx, "run-1", 0, func(id uint64, e event.Event) error {
			fmt.Println(id, e.Type)
			return nil
		})
	})
	// Output:
	// 1000 run.started
	// 1001 thread.spawned
	// 1002 run.finished
}
