package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// throughput runs Parents runs at once, each root spawning
// HelpersPerParent helpers one after another, over Workers workers.
func (b *suite) throughput(ctx context.Context, res *Result) error {
	set := b.set
	b.logf("   %d parents × %d helpers over %d workers", set.Parents, set.HelpersPerParent, set.Workers)
	c, err := startCluster(ctx, false, set.Workers, max(set.Slots, set.Parents))
	if err != nil {
		return err
	}
	defer c.stop()
	_, raw, err := rawRoundTrips(c.dial, 100, set.Window)
	if err != nil {
		return err
	}
	if _, err := c.run(ctx, runOpts{task: listTask(20), agent: rootAgent(false, 0)}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	task := listTask(set.HelpersPerParent)
	errs := make([]error, set.Parents)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range set.Parents {
		wg.Go(func() {
			_, errs[i] = c.run(ctx, runOpts{task: task, agent: rootAgent(false, 0)})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	helpers := set.Parents * set.HelpersPerParent
	hps := float64(helpers) / elapsed.Seconds()
	t := &Throughput{Parents: set.Parents, HelpersPerParent: set.HelpersPerParent, Workers: set.Workers,
		Slots: max(set.Slots, set.Parents), Helpers: helpers, Seconds: round(elapsed.Seconds(), 3),
		HelpersPerSec: round(hps, 0), RawRequestsPerSec: round(raw, 0), Ratio: round(hps/(raw/2), 3)}
	res.Throughput = t
	res.SpawnThroughputRatio = ptr(t.Ratio)
	return nil
}
