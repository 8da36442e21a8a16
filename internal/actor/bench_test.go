package actor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/actor"
)

// counter counts what it receives; one value is shared by many actors so
// the measurements see the engine's cost, not the receiver's.
type counter struct{ n atomic.Int64 }

func (c *counter) Receive(*actor.Context) { c.n.Add(1) }

// sendAll sends until accepted: a full mailbox is back-pressure, not failure.
func sendAll(tb testing.TB, e *actor.Engine, pid actor.PID, msg any) {
	for {
		err := e.Send(pid, msg)
		if err == nil {
			return
		}
		if !errors.Is(err, actor.ErrMailboxFull) {
			tb.Fatal(err)
		}
		runtime.Gosched()
	}
}

func waitCount(tb testing.TB, c *counter, n int64) {
	deadline := time.Now().Add(wait)
	for c.n.Load() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("received %d of %d", c.n.Load(), n)
		}
		runtime.Gosched()
	}
}

func BenchmarkEngineSend(b *testing.B) {
	e := newEngine(b, actor.EngineConfig{MailboxSize: 1024})
	c := &counter{}
	pid, err := e.Spawn("sink", c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := int64(1) // Started
	for b.Loop() {
		sendAll(b, e, pid, 1) // small ints box without allocating
		n++
	}
	waitCount(b, c, n)
}

// BenchmarkEngineSendParallel: senders on every P, spread over 64 actors.
func BenchmarkEngineSendParallel(b *testing.B) {
	e := newEngine(b, actor.EngineConfig{MailboxSize: 1024})
	c := &counter{}
	pids := make([]actor.PID, 64)
	for i := range pids {
		var err error
		if pids[i], err = e.Spawn(fmt.Sprint(i), c); err != nil {
			b.Fatal(err)
		}
	}
	var sent atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			sendAll(b, e, pids[i%len(pids)], 1)
			i++
		}
		sent.Add(int64(i))
	})
	waitCount(b, c, sent.Load()+int64(len(pids)))
}

func BenchmarkEngineRequest(b *testing.B) {
	e := newEngine(b, actor.EngineConfig{})
	pid, err := e.Spawn("echo", actor.ReceiverFunc(func(c *actor.Context) { c.Respond(c.Message()) }))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Request(ctx, pid, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// idleCost spawns n actors, waits until each has handled Started and let
// go of its goroutine, and returns the heap bytes per actor and the
// goroutines left over.
func idleCost(tb testing.TB, n int) (bytesPerActor float64, extraGoroutines int) {
	c := &counter{}
	ids := make([]string, n) // ids exist before the engine: they are the caller's
	for i := range ids {
		ids[i] = fmt.Sprintf("thread-%08d", i)
	}
	goroutines := runtime.NumGoroutine()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	e := actor.NewEngine(actor.EngineConfig{Address: "w1"})
	for _, id := range ids {
		if _, err := e.Spawn(id, c); err != nil {
			tb.Fatal(err)
		}
	}
	waitCount(tb, c, int64(n))
	deadline := time.Now().Add(wait)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	extraGoroutines = runtime.NumGoroutine() - goroutines
	runtime.GC()
	runtime.ReadMemStats(&after)
	bytesPerActor = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)

	runtime.KeepAlive(e)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		tb.Fatal(err)
	}
	return bytesPerActor, extraGoroutines
}

// BenchmarkIdleActors reports the resident cost of an idle actor (heap
// bytes, engine map entry included, after Started was handled).
func BenchmarkIdleActors(b *testing.B) {
	const n = 10_000
	var total float64
	runs := 0
	for b.Loop() {
		per, _ := idleCost(b, n)
		total += per
		runs++
	}
	b.ReportMetric(total/float64(runs), "B/actor")
	b.ReportMetric(0, "ns/op")
}

func TestIdleActorsCostLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 10,000 actors")
	}
	per, extra := idleCost(t, 10_000)
	t.Logf("idle actor: %.0f bytes, %d goroutines left over", per, extra)
	if extra > 0 {
		t.Errorf("%d goroutines remain for 10,000 idle actors, want 0", extra)
	}
	if per > 1024 {
		t.Errorf("idle actor costs %.0f bytes, want under 1 KiB", per)
	}
}
