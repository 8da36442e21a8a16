package store_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

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

// Following a run's events as the HTTP API's SSE stream does: the sequence
// is the event id a client resumes from.
func ExampleStore_Events() {
	withStore(func(ctx context.Context, nc *nats.Conn, st *store.Store) error {
		for _, typ := range []event.Type{event.RunStarted, event.ThreadSpawned, event.RunFinished} {
			e := event.Event{Type: typ, RunID: "run-1"}
			data, err := event.Marshal(e)
			if err != nil {
				return err
			}
			if err := nc.Publish(wire.SubjectEvents("run-1")+"."+string(typ), data); err != nil {
				return err
			}
		}
		return st.Events(ctx, "run-1", 0, func(seq uint64, e event.Event) error {
			fmt.Println(seq, e.Type)
			return nil
		})
	})
	// Output:
	// 1 run.started
	// 2 thread.spawned
	// 3 run.finished
}
