package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// throughput runs Parents runs at once, each root spawning
// HelpersPerParent helpers one after another, over Workers workers.
func (b *suite) throughput(ctx context.Context, res *Result) error {
	set := b.set
	b.logf("   %d parents × %d helpers over %d workers", set.Parents, set.HelpersPerParent, set.Workers)
	c, err := b.startCluster(ctx, false, set.Workers, max(set.Slots, set.Parents), nil)
	if err != nil {
		return err
	}
	defer c.stop()
	_, raw, rawCPU, err := rawRoundTrips(c.dial, 100, set.Window)
	if err != nil {
		return err
	}
	if _, err := c.run(ctx, runOpts{task: listTask(20), agent: rootAgent(false, 0)}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	task := listTask(set.HelpersPerParent)
	errs := make([]error, set.Parents)
	var wg sync.WaitGroup
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	in0, out0 := c.messages()
	st0, ev0 := c.stored()
	start, cpu0 := time.Now(), cpuTime()
	for i := range set.Parents {
		wg.Go(func() {
			_, errs[i] = c.run(ctx, runOpts{task: task, agent: rootAgent(false, 0)})
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&ms1)
	in1, out1 := c.messages()
	st1, ev1 := c.stored()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	helpers := set.Parents * set.HelpersPerParent
	hps := float64(helpers) / elapsed.Seconds()
	t := &Throughput{Parents: set.Parents, HelpersPerParent: set.HelpersPerParent, Workers: set.Workers,
		Slots: max(set.Slots, set.Parents), Helpers: helpers, Seconds: round(elapsed.Seconds(), 3),
		HelpersPerSec: round(hps, 0), RawRequestsPerSec: round(raw, 0), Ratio: round(hps/(raw/2), 3),
		CPUPerHelperUs: round(float64(cpu)/float64(time.Microsecond)/float64(helpers), 1), RawCPUPerRequestUs: round(rawCPU, 2),
		AllocsPerHelper:       round(float64(ms1.Mallocs-ms0.Mallocs)/float64(helpers), 0),
		AllocBytesPerHelper:   round(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(helpers), 0),
		MessagesPerHelper:     round(float64(in1-in0)/float64(helpers), 1),
		DeliveriesPerHelper:   round(float64(out1-out0)/float64(helpers), 1),
		StoredPerHelper:       round(float64(st1-st0)/float64(helpers), 1),
		EventsStoredPerHelper: round(float64(ev1-ev0)/float64(helpers), 1)}
	if t.CPUPerHelperUs > 0 {
		t.CPURatio = round(2*t.RawCPUPerRequestUs/t.CPUPerHelperUs, 3)
	}
	res.Throughput = t
	res.SpawnThroughputRatio = ptr(t.Ratio)
	return nil
}
