package store_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/store"
)

// TestClusterAssetCost measures, on a 3-node loopback cluster in this
// process, what the store's assets and one more of each kind cost: the
// store's Open (12 streams and the consumers of the queue and the webhooks, replicated 3 times),
// a replicated stream, a replicated durable consumer and an R1 in-memory
// consumer (what a KV watch or an ordered consumer is) each made one after
// another, the heap and the idle CPU they hold, and a replicated stream's
// message rate. It asserts nothing; docs/scaling.md quotes its log:
//
//	FORMICA_ASSET_COST=1 go test -run TestClusterAssetCost -v -timeout 10m ./internal/store
func TestClusterAssetCost(t *testing.T) {
	if os.Getenv("FORMICA_ASSET_COST") != "1" {
		t.Skip("a measurement: set FORMICA_ASSET_COST=1")
	}
	nodes := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nc, err := broker.Connect(ctx, broker.ClientConfig{URLs: brokertest.URLs(nodes...), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	if _, err := store.Open(ctx, nc, store.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	opened := time.Since(t0)
	t0 = time.Now()
	if _, err := store.Open(ctx, nc, store.Config{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	t.Logf("store.Open, Replicas 3: %v to create its 12 streams and its 2 consumers, %v to open them again", opened.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))

	const idle = 10 * time.Second
	heap0 := heapInUse()
	cpu0 := idleCPU(t, idle)
	t.Logf("the store alone: heap %.1f MiB (3 servers and the client), idle CPU %.1f ms/s", mib(heap0), cpu0)

	const n = 100
	made := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprintf("COST_%03d", i), Subjects: []string{fmt.Sprintf("cost.%03d", i)},
			Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
		made = append(made, time.Since(t0))
	}
	heap1 := heapInUse()
	cpu1 := idleCPU(t, idle)
	t.Logf("%d more R3 streams, one after another: %s each; heap +%.1f KiB a stream; idle CPU %.1f ms/s (+%.2f ms/s a stream)",
		n, spread(made), kib(heap1-heap0)/n, cpu1, (cpu1-cpu0)/n)

	made = made[:0]
	for i := range n {
		t0 := time.Now()
		if _, err := js.CreateConsumer(ctx, "COST_000", jetstream.ConsumerConfig{Durable: fmt.Sprintf("d%03d", i), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		made = append(made, time.Since(t0))
	}
	heap2 := heapInUse()
	cpu2 := idleCPU(t, idle)
	t.Logf("%d R3 durable consumers on one stream: %s each; heap +%.1f KiB a consumer; idle CPU %.1f ms/s (+%.2f ms/s a consumer)",
		n, spread(made), kib(heap2-heap1)/n, cpu2, (cpu2-cpu1)/n)

	made = made[:0]
	for i := range n {
		t0 := time.Now()
		if _, err := js.CreateConsumer(ctx, "COST_001", jetstream.ConsumerConfig{Name: fmt.Sprintf("o%03d", i), AckPolicy: jetstream.AckNonePolicy,
			Replicas: 1, MemoryStorage: true, InactiveThreshold: time.Hour}); err != nil {
			t.Fatal(err)
		}
		made = append(made, time.Since(t0))
	}
	heap3 := heapInUse()
	t.Logf("%d R1 in-memory consumers on one stream (what an ordered consumer, a KV watch, is): %s each; heap +%.1f KiB a consumer",
		n, spread(made), kib(heap3-heap2)/n)

	// A replicated stream's message rate: 1 KiB messages, published with
	// up to 256 unacknowledged, then one at a time.
	const msgs = 20_000
	body := make([]byte, 1024)
	ajs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	for range msgs {
		if _, err := ajs.PublishAsync("cost.002", body); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ajs.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishes not acked")
	}
	rate := float64(msgs) / time.Since(t0).Seconds()
	sync := make([]time.Duration, 0, 2000)
	for range cap(sync) {
		t0 := time.Now()
		if _, err := js.Publish(ctx, "cost.002", body); err != nil {
			t.Fatal(err)
		}
		sync = append(sync, time.Since(t0))
	}
	t.Logf("R3 stream, 1 KiB messages: %.0f stored a second with 256 in flight; %s each one at a time", rate, spread(sync))
}

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// idleCPU is the process's CPU time per second of wall time over d, in
// milliseconds.
func idleCPU(t *testing.T, d time.Duration) float64 {
	t.Helper()
	before := cpuTime(t)
	time.Sleep(d) // a measurement window, not a synchronisation
	return float64((cpuTime(t) - before).Microseconds()) / 1000 / d.Seconds()
}

func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spread is the median and the 90th percentile of ds.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("p50 %v, p90 %v", s[len(s)/2].Round(10*time.Microsecond), s[len(s)*9/10].Round(10*time.Microsecond))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
func kib(b int64) float64 { return float64(b) / (1 << 10) }
