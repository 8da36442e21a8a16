package embedded

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
)

// TestStoreFootprintPerRun measures what a queued run of the sim model
// stores, by the number of its helpers: the messages written to each of
// the store's streams (a record's every write, each batch of events, each
// journal message) and the bytes kept once it ended. It asserts nothing;
// docs/scaling.md quotes its log:
//
//	FORMICA_ASSET_COST=1 go test -run TestStoreFootprintPerRun -v ./internal/embedded
func TestStoreFootprintPerRun(t *testing.T) {
	if os.Getenv("FORMICA_ASSET_COST") != "1" {
		t.Skip("a measurement: set FORMICA_ASSET_COST=1")
	}
	s, _ := startSecuredWith(t, func(c *Config) { c.Workers, c.Slots = 4, 32 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nc, err := s.ConnectAs(auth.Client, "footprint", "footprint")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, nc, store.Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Conn: nc, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	admin, err := s.Connect("footprint-admin")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	streams := []string{store.QueueStream, store.EventsStream, store.IndexStream, store.JournalStream,
		"KV_" + store.RunsBucket, store.TransfersStream}
	type state struct{ written, bytes uint64 }
	states := func() map[string]state {
		t.Helper()
		m := map[string]state{}
		for _, name := range streams {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			m[name] = state{st.CachedInfo().State.LastSeq, st.CachedInfo().State.Bytes}
		}
		return m
	}
	for _, sz := range []struct{ helpers, runs int }{{0, 20}, {1, 20}, {10, 10}, {100, 3}} {
		task := "Say hello"
		if sz.helpers > 0 {
			var b strings.Builder
			b.WriteString("Plan:")
			for i := range sz.helpers {
				fmt.Fprintf(&b, "\n- item %d", i)
			}
			task = b.String()
		}
		before := states()
		for range sz.runs {
			sub := simSubmit(t, task, 0, limits.Config{MaxThreads: max(sz.helpers, 1)})
			if err := svc.Enqueue(ctx, sub); err != nil {
				t.Fatal(err)
			}
			records, err := st.WatchRecord(ctx, sub.RunID)
			if err != nil {
				t.Fatal(err)
			}
			for r := range records {
				if r.Status.Final() {
					if r.Status != event.Succeeded || len(r.Threads) != sz.helpers+1 {
						t.Fatalf("run of %d helpers: %s (%s), %d threads", sz.helpers, r.Status, r.Error, len(r.Threads))
					}
					break
				}
			}
		}
		after := states()
		var line strings.Builder
		var total float64
		for _, name := range streams {
			w := float64(after[name].written-before[name].written) / float64(sz.runs)
			kept := float64(after[name].bytes-before[name].bytes) / float64(sz.runs)
			total += w
			fmt.Fprintf(&line, "; %s %.1f msgs, %.1f KiB kept", name, w, kept/1024)
		}
		t.Logf("a run of %d helpers (%d runs): %.1f messages stored%s", sz.helpers, sz.runs, total, line.String())
	}
}
