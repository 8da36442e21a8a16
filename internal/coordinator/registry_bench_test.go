package coordinator

import (
	"context"
	"runtime"
	"testing"
	"time"
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
