package actor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/actor"
)

func TestRequestRespond(t *testing.T) {
	e := newEngine(t, actor.EngineConfig{})
	pid, err := e.Spawn("echo", actor.ReceiverFunc(func(c *actor.Context) {
		switch m := c.Message().(type) {
		case string:
			if m != "ignore" {
				c.Respond("echo:" + m)
				c.Respond("only the first counts")
			}
		case time.Duration:
			time.Sleep(m)
			c.Respond("late")
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	if v, err := e.Request(ctx, pid, "hi"); err != nil || v != "echo:hi" {
		t.Errorf("Request = %v, %v; want echo:hi", v, err)
	}
	if _, err := e.Request(ctx, pid, "ignore"); !errors.Is(err, actor.ErrNoResponse) {
		t.Errorf("unanswered Request = %v, want ErrNoResponse", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := e.Request(short, pid, 500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow Request = %v, want DeadlineExceeded", err)
	}
	if _, err := e.Request(ctx, actor.PID{ID: "nobody"}, "hi"); !errors.Is(err, actor.ErrNoActor) {
		t.Errorf("Request to nobody = %v, want ErrNoActor", err)
	}
}

// queuedRequest starts a Request in the background and returns once it sits
// in the mailbox (which then holds want messages).
func queuedRequest(t *testing.T, ctx context.Context, e *actor.Engine, pid actor.PID, msg any, want int) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() { _, err := e.Request(ctx, pid, msg); res <- err }()
	for actor.MailboxLen(e, pid) < want {
		if ctx.Err() != nil {
			t.Fatal("request never queued")
		}
		time.Sleep(time.Millisecond)
	}
	return res
}

func TestPanicStopsActor(t *testing.T) {
	e := newEngine(t, actor.EngineConfig{})
	r := &recorder{}
	entered, hold := make(chan struct{}), make(chan struct{})
	pid, err := e.Spawn("p", actor.ReceiverFunc(func(c *actor.Context) {
		r.Receive(c)
		switch c.Message() {
		case "hold":
			close(entered)
			<-hold
		case "boom":
			panic("boom")
		case actor.Stopped{}:
			panic("again, while stopping") // recovered too
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	if err := e.Send(pid, "hold"); err != nil {
		t.Fatal(err)
	}
	<-entered
	boom := queuedRequest(t, ctx, e, pid, "boom", 1)
	after := queuedRequest(t, ctx, e, pid, "after", 2) // behind the panic: must fail fast, not hang
	close(hold)
	for _, c := range []struct {
		ch   <-chan error
		want error
	}{{boom, actor.ErrPanic}, {after, actor.ErrNoActor}} {
		select {
		case err := <-c.ch:
			if !errors.Is(err, c.want) {
				t.Errorf("request = %v, want %v", err, c.want)
			}
		case <-ctx.Done():
			t.Fatal("request hung")
		}
	}
	if err := e.StopWait(ctx, pid); err != nil {
		t.Fatal(err)
	}
	want := []any{actor.Started{}, "hold", "boom", actor.Stopped{}}
	if diff := cmp.Diff(want, r.messages()); diff != "" {
		t.Errorf("received around a panic (-want +got):\n%s", diff)
	}
	if e.Len() != 0 {
		t.Errorf("panicked actor still registered")
	}
}

func TestStopCancelsActorContext(t *testing.T) {
	e := newEngine(t, actor.EngineConfig{})
	cause := make(chan error, 1)
	pid, err := e.Spawn("w", actor.ReceiverFunc(func(c *actor.Context) {
		if c.Message() == "work" {
			ctx := c.Context()
			select {
			case <-ctx.Done():
				cause <- context.Cause(ctx)
			case <-time.After(wait):
				cause <- errors.New("context never cancelled")
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Send(pid, "work"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // usually inside Receive by now; either order must work
	if err := e.StopWait(bounded(t), pid); err != nil {
		t.Fatal(err)
	}
	if err := <-cause; !errors.Is(err, actor.ErrStopped) {
		t.Errorf("cause = %v, want ErrStopped", err)
	}
}

func TestSender(t *testing.T) {
	e := newEngine(t, actor.EngineConfig{Address: "w1"})
	got := make(chan string, 2)
	b, err := e.Spawn("b", actor.ReceiverFunc(func(c *actor.Context) {
		if _, ok := c.Message().(string); ok {
			s, ok := c.Sender()
			got <- fmt.Sprint(s, ok)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.Spawn("a", actor.ReceiverFunc(func(c *actor.Context) {
		if c.Message() == "go" {
			_ = c.Send(b, "hello")
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Send(a, "go"); err != nil {
		t.Fatal(err)
	}
	if err := e.Send(b, "anonymous"); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for range 2 {
		select {
		case s := <-got:
			seen = append(seen, s)
		case <-time.After(wait):
			t.Fatal("timed out")
		}
	}
	if !(seen[0] == "w1/a true" || seen[1] == "w1/a true") || !(seen[0] == "/ false" || seen[1] == "/ false") {
		t.Errorf("senders seen: %q", seen)
	}
}
