package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/limits"
)

// spawnsPerRun bounds one root's sequential spawns, so no conversation grows
// with the sample count.
const spawnsPerRun = 200

// spawnWorkers and spawnSlots: the parent on one worker, its helper on the other.
const (
	spawnWorkers = 2
	spawnSlots   = 64
)

func (b *suite) spawn(ctx context.Context, res *Result) error {
	inproc, err := b.spawnLatency(ctx, false)
	if err != nil {
		return err
	}
	tcp, err := b.spawnLatency(ctx, true)
	if err != nil {
		return err
	}
	res.Spawn = &Spawn{Inproc: inproc, TCP: tcp}
	res.SpawnP50RatioInproc, res.SpawnP50RatioTCP = ptr(inproc.Ratio), ptr(tcp.Ratio)
	return nil
}

// spawnLatency times one spawn at a time through a two-worker stack, next to
// raw round trips on the same server and kind of connection.
func (b *suite) spawnLatency(ctx context.Context, tcp bool) (*SpawnLatency, error) {
	kind := "in-process"
	if tcp {
		kind = "TCP"
	}
	b.logf("   spawn latency, %s: %d spawns", kind, b.set.Samples)
	c, err := b.startCluster(ctx, tcp, spawnWorkers, spawnSlots, nil)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	raw, _, _, err := rawRoundTrips(c.dial, b.set.Samples, 0)
	if err != nil {
		return nil, err
	}
	// Warm up: open the sim model, the harness, the pools.
	if _, err := c.run(ctx, runOpts{task: listTask(20), agent: rootAgent(false, 0)}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	var lat []time.Duration
	cross, helpers := 0, 0
	cpu0 := cpuTime()
	for left := b.set.Samples; left > 0; left -= spawnsPerRun {
		var times toolTimes
		n := min(left, spawnsPerRun)
		rec, err := c.run(ctx, runOpts{task: listTask(n), agent: rootAgent(false, 0),
			limits: limits.Config{MaxThreads: 1}, times: &times})
		if err != nil {
			return nil, err
		}
		lat = append(lat, times.latencies()...)
		root := ""
		for _, th := range rec.Threads {
			if th.Depth == 0 {
				root = th.Worker
			}
		}
		for _, th := range rec.Threads {
			if th.Depth == 1 {
				helpers++
				if th.Worker != root {
					cross++
				}
			}
		}
	}
	cpu := cpuTime() - cpu0
	if len(lat) < b.set.Samples {
		return nil, fmt.Errorf("too few samples: %d of %d spawns timed", len(lat), b.set.Samples)
	}
	rawP50, p50 := percentile(raw, 0.5), percentile(lat, 0.5)
	return &SpawnLatency{
		Samples: len(lat), P50us: us(p50), P99us: us(percentile(lat, 0.99)),
		RawP50us: us(rawP50), RawP99us: us(percentile(raw, 0.99)),
		Ratio:         round(float64(p50)/float64(2*rawP50), 2),
		CrossWorker:   round(float64(cross)/float64(max(helpers, 1)), 3),
		CPUPerSpawnUs: round(float64(cpu)/float64(time.Microsecond)/float64(len(lat)), 1),
	}, nil
}
