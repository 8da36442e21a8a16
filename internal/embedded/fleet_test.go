package embedded

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamsDoNotGrowWithTheFleet: 200 workers, each on credentials of its
// own, leave the server the streams 2 workers left it, and bodies over the
// NATS max payload still travel between two of them, both ways: a task
// from the root's worker to its helper's, the helper's answer back.
func TestStreamsDoNotGrowWithTheFleet(t *testing.T) {
	var cfg Config
	s, cl := startSecuredWith(t, func(c *Config) { cfg = *c })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nc, err := s.Connect("streams")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	streams := func() []string {
		t.Helper()
		l := js.StreamNames(ctx)
		var names []string
		for n := range l.Name() {
			names = append(names, n)
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		return names
	}
	two := streams()

	const fleet = 200
	for i := len(s.Workers); i < fleet; i++ {
		if err := s.startWorker(ctx, cfg, fmt.Sprintf("fleet-%03d", i), fmt.Sprintf("formica-worker-%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	for len(s.Coordinator.Workers()) < fleet {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d workers registered", len(s.Coordinator.Workers()), fleet)
		case <-time.After(10 * time.Millisecond):
		}
	}
	all := streams()
	t.Logf("streams with 2 workers: %d, with %d: %d", len(two), fleet, len(all))
	if !slices.Equal(all, two) {
		more := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return slices.Contains(two, n) })
		t.Errorf("%d workers left %d streams, 2 left %d (%v); %d more: %.300v", fleet, len(all), len(two), two, len(more), more)
	}

	rec := runLargeBodies(t, s, cl)
	workers := map[string]bool{}
	for _, th := range rec.Threads {
		workers[th.Worker] = true
	}
	if len(rec.Threads) != 2 || len(workers) != 2 || workers[""] {
		t.Errorf("root and helper ran on %v, want two workers", workers)
	}
}
