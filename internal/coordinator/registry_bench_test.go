package coordinator

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// BenchmarkPlaceQueued is placement with no free slot, as in a fan-out wider
// than the fleet: each placement waits in the FIFO queue until a release
// hands it the slot. An op is one wait and one hand-over (the waiting
// goroutine's start included).
func BenchmarkPlaceQueued(b *testing.B) {
	g := newRegistry(time.Now)
	g.heartbeat(hb("a", 1))
	ctx := context.Background()
	held, err := g.place(ctx, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan string)
	for b.Loop() {
		go func() {
			id, err := g.place(ctx, 10*time.Second)
			if err != nil {
				b.Error(err)
			}
			got <- id
		}()
		for queued := 0; queued == 0; {
			g.mu.Lock()
			queued = g.waiters.Len()
			g.mu.Unlock()
			if queued == 0 {
				runtime.Gosched()
			}
		}
		g.release(held)
		held = <-got
	}
}

// BenchmarkPlaceFleet is one placement and its release, one at a time, by
// the size of the fleet: a placement looks at every live worker for the
// least loaded one.
func BenchmarkPlaceFleet(b *testing.B) {
	for _, n := range []int{16, 1000, 10000} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			g := newRegistry(time.Now)
			for i := range n {
				g.heartbeat(hb(fmt.Sprintf("w%05d", i), 64))
			}
			ctx := context.Background()
			for b.Loop() {
				id, err := g.place(ctx, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				g.release(id)
			}
		})
	}
}

// BenchmarkWorkerHeartbeat is what a coordinator does with each worker's
// heartbeat once NATS delivered it: decode it and note it, here in a
// fleet of 10,000 workers.
func BenchmarkWorkerHeartbeat(b *testing.B) {
	const n = 10000
	g := newRegistry(time.Now)
	msgs := make([][]byte, n)
	for i := range n {
		h := wire.WorkerHeartbeat{ID: fmt.Sprintf("w%05d", i), Host: "host", Slots: 64, Interval: time.Second, Sandbox: "on"}
		msgs[i] = wire.MustEncode(wire.TypeWorkerHeartbeat, h)
		g.heartbeat(h)
	}
	i := 0
	for b.Loop() {
		var h wire.WorkerHeartbeat
		if err := wire.DecodeAs(msgs[i%n], wire.TypeWorkerHeartbeat, &h); err != nil {
			b.Fatal(err)
		}
		g.heartbeat(h)
		i++
	}
}
