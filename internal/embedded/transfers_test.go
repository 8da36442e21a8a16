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
)

// TestDrainedTransfersBucketsAreRemoved: the transfers buckets of an
// earlier version (the coordinators' and one per worker, a stream each)
// found by a coordinator as it starts are removed once nothing is left in
// them: the empty ones at once, one holding a body once that body is gone
// (deleted, or past its age); the run records' bucket stays.
func TestDrainedTransfersBucketsAreRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	const beat = 50 * time.Millisecond
	cfg := Config{Workers: 1, Slots: 1, Authority: a, Durable: true, Server: brokerDurable(t),
		Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: beat,
		Coordinator: coordinator.Config{Cwd: os.TempDir(), TransfersSweep: 2 * beat}}
	buckets := func(js jetstream.JetStream) []string {
		t.Helper()
		var names []string
		l := js.ObjectStoreNames(ctx)
		for n := range l.Name() {
			names = append(names, n)
		}
		if err := l.Error(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		return names
	}

	// What an earlier version left: its buckets, one holding a body.
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var full jetstream.ObjectStore
	for _, b := range []string{"formica_transfers", "formica_transfers_w_gone-empty", "formica_transfers_w_gone-full"} {
		ob, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		full = ob
	}
	if _, err := full.PutBytes(ctx, "payloads/body", []byte("not yet read")); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	s, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if nc, err = s.Connect("test"); err != nil {
		t.Fatal(err)
	}
	if js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, want ...string) {
		t.Helper()
		for {
			names := buckets(js)
			if slices.Equal(names, want) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: buckets %v, want %v", what, names, want)
			case <-time.After(beat):
			}
		}
	}
	waitFor("the empty buckets removed as the coordinator starts", store.PayloadsBucket, "formica_transfers_w_gone-full")
	if full, err = js.ObjectStore(ctx, "formica_transfers_w_gone-full"); err != nil {
		t.Fatal(err)
	}
	if err := full.Delete(ctx, "payloads/body"); err != nil {
		t.Fatal(err)
	}
	waitFor("the last bucket removed once its body is gone", store.PayloadsBucket)
}
