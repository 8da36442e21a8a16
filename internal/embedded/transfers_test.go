package embedded

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/worker"
)

// TestEmptyTransfersOfWorkersGoneAreRemoved: a worker's transfers bucket
// is a stream the server keeps; the coordinator removes those that hold
// nothing and whose workers it has not known for a whole sweep, keeps the
// rest, and makes the bucket again for a worker that comes back.
func TestEmptyTransfersOfWorkersGoneAreRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	const beat = 50 * time.Millisecond
	s, err := Start(ctx, Config{Workers: 1, Slots: 1, Authority: a, Durable: true, Server: brokerDurable(t),
		Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: beat,
		Coordinator: coordinator.Config{Cwd: os.TempDir(), TransfersSweep: 2 * beat}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Two workers gone before this coordinator started: one left its bucket
	// empty, the other left a body in it.
	for _, id := range []string{"gone-empty", "gone-full"} {
		if err := s.Store.OpenWorkerTransfers(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	full, err := js.ObjectStore(ctx, store.WorkerTransfers("gone-full"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := full.PutBytes(ctx, "body", []byte("not yet read")); err != nil {
		t.Fatal(err)
	}
	// A worker that comes, goes and comes back under one id.
	startBack := func() *worker.Worker {
		t.Helper()
		wnc, err := s.ConnectAs(auth.Worker, "w-back", "w-back")
		if err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(worker.Config{ID: "w-back", Conn: wnc, Slots: 1, HeartbeatInterval: beat,
			Models: runner.ModelOpenerFunc(providers.Open)})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return w
	}
	buckets := func() []string {
		t.Helper()
		var names []string
		l := js.ObjectStoreNames(ctx)
		for n := range l.Name() {
			names = append(names, n)
		}
		if err := l.Error(); err != nil {
			t.Fatal(err)
		}
		return names
	}
	waitFor := func(what string, ok func([]string) bool) []string {
		t.Helper()
		for {
			names := buckets()
			if ok(names) {
				return names
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: buckets %v", what, names)
			case <-time.After(beat):
			}
		}
	}
	has := func(id string) func([]string) bool {
		return func(names []string) bool { return slices.Contains(names, store.WorkerTransfers(id)) }
	}

	back := startBack()
	waitFor("w-back's bucket made when it joins", has("w-back"))
	if err := back.Stop(); err != nil {
		t.Fatal(err)
	}
	names := waitFor("empty buckets of workers gone removed", func(names []string) bool {
		return !has("gone-empty")(names) && !has("w-back")(names)
	})
	for _, id := range []string{"gone-full", s.Workers[0].ID()} {
		if !has(id)(names) {
			t.Errorf("%s's bucket removed: it holds a body, or its worker is live (%v)", id, names)
		}
	}
	back = startBack()
	defer back.Stop()
	waitFor("w-back's bucket made again when it comes back", has("w-back"))
}
