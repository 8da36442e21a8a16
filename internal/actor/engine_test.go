package actor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/actor"
)

const wait = 10 * time.Second

func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

func newEngine(t testing.TB, cfg actor.EngineConfig) *actor.Engine {
	e := actor.NewEngine(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return e
}

// recorder keeps every message it receives, lifecycle included.
type recorder struct {
	mu  sync.Mutex
	got []any
}

func (r *recorder) Receive(c *actor.Context) {
	r.mu.Lock()
	r.got = append(r.got, c.Message())
	r.mu.Unlock()
}

func (r *recorder) messages() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.got...)
}

func TestLifecycleAndOrder(t *testing.T) {
	e := newEngine(t, actor.EngineConfig{Address: "w1", MailboxSize: 2000})
	r := &recorder{}
	pid, err := e.Spawn("a", r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(actor.PID{Address: "w1", ID: "a"}, pid); diff != "" {
		t.Errorf("pid (-want +got):\n%s", diff)
	}
	want := []any{actor.Started{}}
	for i := range 1000 {
		if err := e.Send(pid, i); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		want = append(want, i)
	}
	if err := e.StopWait(bounded(t), pid); err != nil {
		t.Fatal(err)
	}
	want = append(want, actor.Stopped{})
	if diff := cmp.Diff(want, r.messages()); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	if n := e.Len(); n != 0 {
		t.Errorf("Len after stop = %d", n)
	}
	if err := e.Send(pid, "late"); !errors.Is(err, actor.ErrNoActor) {
		t.Errorf("Send after stop = %v, want ErrNoActor", err)
	}
	if err := e.Stop(pid); !errors.Is(err, actor.ErrNoActor) {
		t.Errorf("Stop of a gone actor = %v, want ErrNoActor", err)
	}
}

func TestSpawnErrors(t *testing.T) {
	e := newEngine(t, actor.EngineConfig{Address: "w1"})
	pid, err := e.Spawn("a", &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Spawn("a", &recorder{}); !errors.Is(err, actor.ErrExists) {
		t.Errorf("duplicate Spawn = %v, want ErrExists", err)
	}
	if _, err := e.Spawn("", &recorder{}); !errors.Is(err, actor.ErrInvalidConfig) {
		t.Errorf("Spawn without id = %v, want ErrInvalidConfig", err)
	}
	if _, err := e.Spawn("b", &recorder{}, actor.WithMailboxSize(0)); !errors.Is(err, actor.ErrInvalidConfig) {
		t.Errorf("Spawn with mailbox 0 = %v, want ErrInvalidConfig", err)
	}
	if err := e.Send(actor.PID{Address: "w2", ID: "a"}, 1); !errors.Is(err, actor.ErrNotLocal) {
		t.Errorf("Send to another address = %v, want ErrNotLocal", err)
	}
	if err := e.Send(actor.PID{ID: "a"}, 1); err != nil {
		t.Errorf("Send with empty address = %v, want local delivery", err)
	}
	// Stop twice is fine; once gone, the id is free again.
	ctx := bounded(t)
	if err := e.Stop(pid); err != nil {
		t.Fatal(err)
	}
	if err := e.StopWait(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Spawn("a", &recorder{}); err != nil {
		t.Errorf("Spawn after stop: %v", err)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Spawn("c", &recorder{}); !errors.Is(err, actor.ErrClosed) {
		t.Errorf("Spawn after Shutdown = %v, want ErrClosed", err)
	}
	if n := e.Len(); n != 0 {
		t.Errorf("Len after Shutdown = %d", n)
	}
}

// blocker holds its first non-lifecycle message until released.
type blocker struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blocker) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Started, actor.Stopped:
		return
	}
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
}

func TestMailboxFull(t *testing.T) {
	e := newEngine(t, actor.EngineConfig{})
	b := &blocker{entered: make(chan struct{}), release: make(chan struct{})}
	pid, err := e.Spawn("a", b, actor.WithMailboxSize(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Send(pid, "hold"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.entered:
	case <-time.After(wait):
		t.Fatal("actor never got its first message")
	}
	for i := range 4 {
		if err := e.Send(pid, i); err != nil {
			t.Fatalf("Send %d into a mailbox of 4: %v", i, err)
		}
	}
	start := time.Now()
	if err := e.Send(pid, "one too many"); !errors.Is(err, actor.ErrMailboxFull) {
		t.Fatalf("Send into a full mailbox = %v, want ErrMailboxFull", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Send into a full mailbox blocked for %v", d)
	}
	close(b.release)
	if err := e.StopWait(bounded(t), pid); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentSenders: many goroutines send at once; each sender's
// messages arrive in its own order and none is lost (run with -race).
func TestConcurrentSenders(t *testing.T) {
	const senders, each = 8, 2000
	e := newEngine(t, actor.EngineConfig{MailboxSize: 256})
	type msg struct{ from, seq int }
	last := make([]int, senders)
	var bad []string
	done := make(chan struct{})
	total := 0
	pid, err := e.Spawn("sink", actor.ReceiverFunc(func(c *actor.Context) {
		m, ok := c.Message().(msg)
		if !ok {
			return
		}
		if m.seq != last[m.from]+1 {
			bad = append(bad, fmt.Sprintf("sender %d: %d after %d", m.from, m.seq, last[m.from]))
		}
		last[m.from] = m.seq
		if total++; total == senders*each {
			close(done)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	var wg sync.WaitGroup
	for from := range senders {
		wg.Go(func() {
			for seq := 1; seq <= each; {
				switch err := e.Send(pid, msg{from, seq}); {
				case err == nil:
					seq++
				case errors.Is(err, actor.ErrMailboxFull) && ctx.Err() == nil:
					time.Sleep(10 * time.Microsecond)
				default:
					t.Errorf("Send: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("received %d of %d", total, senders*each)
	}
	if err := e.StopWait(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("out of order: %v", bad[:min(5, len(bad))])
	}
}
