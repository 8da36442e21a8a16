package embedded

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
)

// TestWorkerStoppedCleanlyLeaves: a worker stopped cleanly (a drain, as on
// SIGTERM) says so in its last heartbeat; its coordinator forgets it at
// once as a worker that left, not lost: formica_workers_left_total counts
// it and formica_workers_lost_total stays 0.
func TestWorkerStoppedCleanlyLeaves(t *testing.T) {
	m := metrics.New(metrics.All)
	s, _ := startStackOf(t, Config{Workers: 2, Slots: 2, Metrics: m, Models: runner.ModelOpenerFunc(providers.Open)})
	gone := s.Workers[1]
	if err := gone.Drain(time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	for slices.Contains(workerIDs(s), gone.ID()) {
		select {
		case <-ctx.Done():
			t.Fatalf("the drained worker %s is still listed: %v", gone.ID(), workerIDs(s))
		case <-time.After(10 * time.Millisecond):
		}
	}
	values := map[string]float64{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetCounter() != nil {
			values[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{"formica_workers_left_total": 1, "formica_workers_lost_total": 0} {
		if got, ok := values[name]; !ok || got != want {
			t.Errorf("%s = %v (exported: %v), want %v", name, got, ok, want)
		}
	}
}
