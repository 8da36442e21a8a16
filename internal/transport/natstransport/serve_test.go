package natstransport

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// goroutineID is the id runtime.Stack prints for the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// ask sends one request to subject and waits for its reply.
func ask(t *testing.T, ctx context.Context, tr *Transport, subject string) {
	t.Helper()
	call, err := transport.Request(ctx, tr, subject, wire.Msg{Type: "ping"})
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	if _, err := call.Next(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// idleWorkers waits (bounded by ctx) until s has n idle workers, as after
// a worker that answered has gone back to wait.
func idleWorkers(t *testing.T, ctx context.Context, s *serveSub, n int) {
	t.Helper()
	for {
		s.mu.Lock()
		idle := len(s.idle)
		s.mu.Unlock()
		if idle == n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d idle workers, want %d", idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServeReusesIdleWorker: the next request is handled by the worker
// that handled the last one, waiting idle, instead of a new goroutine, also
// when the subscription is at its bound of workers; Stop ends idle workers.
func TestServeReusesIdleWorker(t *testing.T) {
	ns := startServer(t, inProcess)
	tr := newTransport(t, connect(t, ns, inProcess), Config{})
	ctx := bounded(t)
	for _, max := range []int{0, 1} {
		var mu sync.Mutex
		var ids []string
		sub, err := tr.Serve("reuse", "", max, func(_ context.Context, m wire.Msg, r transport.Replier) {
			mu.Lock()
			ids = append(ids, goroutineID())
			mu.Unlock()
			r.Reply(wire.Msg{Type: "pong"})
		})
		if err != nil {
			t.Fatal(err)
		}
		s := sub.(*serveSub)
		for range 5 {
			ask(t, ctx, tr, "reuse")
			idleWorkers(t, ctx, s, 1)
		}
		s.mu.Lock()
		running, idle := s.running, len(s.idle)
		s.mu.Unlock()
		if err := sub.Stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, id := range ids[1:] {
			if id != ids[0] {
				t.Errorf("max %d: requests handled on goroutines %v, want one reused", max, ids)
				break
			}
		}
		mu.Unlock()
		if running != 1 || idle != 1 {
			t.Errorf("max %d: between requests %d workers, %d idle; want 1 and 1", max, running, idle)
		}
		s.mu.Lock()
		if s.running != 0 {
			t.Errorf("max %d: %d workers left after Stop", max, s.running)
		}
		s.mu.Unlock()
	}
}

// TestServeIdleWorkersBounded: after a burst handled by many workers at
// once, at most maxIdle stay for the next requests; the others end.
func TestServeIdleWorkersBounded(t *testing.T) {
	ns := startServer(t, inProcess)
	tr := newTransport(t, connect(t, ns, inProcess), Config{})
	ctx := bounded(t)
	const burst = 3 * maxIdle
	var arrived sync.WaitGroup
	arrived.Add(burst)
	release := make(chan struct{})
	sub, err := tr.Serve("burst", "", 0, func(_ context.Context, m wire.Msg, r transport.Replier) {
		arrived.Done()
		<-release
		r.Reply(wire.Msg{Type: "pong"})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	var done sync.WaitGroup
	for range burst {
		done.Go(func() { ask(t, ctx, tr, "burst") })
	}
	arrived.Wait() // every request on a worker of its own
	close(release)
	done.Wait()
	s := sub.(*serveSub)
	for {
		s.mu.Lock()
		running, idle := s.running, len(s.idle)
		s.mu.Unlock()
		if running == idle { // every worker has finished its request
			if idle > maxIdle {
				t.Fatalf("%d idle workers kept, want at most %d", idle, maxIdle)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("workers still running their requests: %d, %d idle", running, idle)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServeMicro: a subject served through a micro endpoint answers as a
// served one does, handlers running side by side (micro calls its
// endpoint's handler one request at a time), and the service counts the
// requests; Stop stops the service.
func TestServeMicro(t *testing.T) {
	ns := startServer(t, inProcess)
	nc := connect(t, ns, inProcess)
	tr := newTransport(t, nc, Config{})
	ctx := bounded(t)
	svc, err := micro.AddService(nc, micro.Config{Name: "served", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	both := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(2)
	sub, err := tr.ServeMicro(svc, "work", "micro.work", 0, func(_ context.Context, m wire.Msg, r transport.Replier) {
		arrived.Done()
		<-both // each answers only once both are in
		r.Reply(wire.Msg{Type: "pong"})
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { arrived.Wait(); close(both) }()
	var asked sync.WaitGroup
	for range 2 {
		asked.Go(func() {
			call, err := transport.Request(ctx, tr, "micro.work", wire.Msg{Type: "ping"})
			if err == nil {
				defer call.Close()
				_, err = call.Next(ctx, 5*time.Second)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	asked.Wait()
	// micro counts a request once its endpoint's handler has returned,
	// which may be after the reply reached the requester, and says nothing
	// when it does: the count is read until it holds, within ctx.
	counted := func() bool {
		e := svc.Stats().Endpoints
		return len(e) == 1 && e[0].Name == "work" && e[0].NumRequests == 2
	}
	for !counted() && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if !counted() {
		t.Errorf("micro stats %+v, want endpoint work with 2 requests", svc.Stats().Endpoints)
	}
	if err := sub.Stop(); err != nil {
		t.Fatal(err)
	}
	if !svc.Stopped() {
		t.Error("the service runs on after its subscription stopped")
	}
}
