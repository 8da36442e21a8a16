package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/formica-run/formica/internal/thread"
)

// heardWorker is a worker hosting threads of coordinator c1 (epoch e1)
// with a one-second heartbeat, built without NATS so that it runs on
// synctest's clock; beat sends c1's heartbeat, as sent now.
type heardWorker struct {
	w     *Worker
	born  time.Time // c1's birth
	hosts map[string]*hosted
}

const heardInterval = time.Second

func newHeardWorker(ids ...string) *heardWorker {
	hw := &heardWorker{
		w: &Worker{cfg: Config{HeartbeatInterval: heardInterval, Logger: slog.New(slog.DiscardHandler)},
			threads: map[string]*hosted{}, coords: map[string]*coordSeen{}},
		born:  time.Now().Add(-time.Minute),
		hosts: map[string]*hosted{},
	}
	for _, id := range ids {
		ctx, cancel := context.WithCancelCause(context.Background())
		h := &hosted{thread: thread.Thread{RunID: "r1", ID: id}, coord: "c1", epoch: "e1", ctx: ctx, cancel: cancel, current: time.Now()}
		hw.w.threads[id], hw.hosts[id] = h, h
	}
	return hw
}

func (hw *heardWorker) beat() {
	hw.w.seeCoordinator("c1", "e1", time.Since(hw.born), heardInterval)
}

// call starts a tool call's guard for thread id; its answer comes on the
// channel.
func (hw *heardWorker) call(ctx context.Context, id string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- hw.w.guard(ctx, &hw.hosts[id].thread) }()
	return done
}

// started reports whether the call has answered, once every goroutine of
// the bubble is blocked: a call still waiting then waits for a signal.
func started(done <-chan error) (error, bool) {
	synctest.Wait()
	select {
	case err := <-done:
		return err, true
	default:
		return nil, false
	}
}

// TestToolCallWaitsForHeartbeat: a tool call starts at once while the
// coordinator was heard from within one interval and its slack; later, it
// waits for the next heartbeat and starts the moment it comes.
func TestToolCallWaitsForHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hw := newHeardWorker("t1")
		hw.beat()
		time.Sleep(heardInterval + heardInterval/4)
		if err, ok := started(hw.call(context.Background(), "t1")); !ok || err != nil {
			t.Fatalf("a call one interval and the slack after a heartbeat: started %v, %v", ok, err)
		}
		time.Sleep(time.Millisecond)
		done := hw.call(context.Background(), "t1")
		if _, ok := started(done); ok {
			t.Fatal("a call started past one interval and the slack without a heartbeat")
		}
		time.Sleep(time.Second) // the heartbeat is late, but within the lease
		if _, ok := started(done); ok {
			t.Fatal("a call started without a heartbeat")
		}
		hw.beat()
		if err, ok := started(done); !ok || err != nil {
			t.Fatalf("the call after the heartbeat: started %v, %v", ok, err)
		}
		if err := context.Cause(hw.hosts["t1"].ctx); err != nil {
			t.Errorf("the thread was stopped: %v", err)
		}
	})
}

// TestToolCallRefusedWhenLeaseLapses: a call waiting for a heartbeat that
// never comes is refused when the lease lapses, three intervals after
// the last heartbeat, and its thread is stopped; a call whose thread is
// cancelled while it waits returns that cause and refuses nothing.
func TestToolCallRefusedWhenLeaseLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hw := newHeardWorker("t1", "t2")
		hw.beat()
		last := time.Now()
		time.Sleep(2 * heardInterval)
		ctx, cancel := context.WithCancelCause(context.Background())
		waiting := hw.call(ctx, "t2")
		if _, ok := started(waiting); ok {
			t.Fatal("a call started two intervals after the last heartbeat")
		}
		stop := errors.New("the run was cancelled")
		cancel(stop)
		if err, ok := started(waiting); !ok || !errors.Is(err, stop) {
			t.Errorf("a cancelled call: answered %v, %v; want the cancel's cause", ok, err)
		}
		if hw.w.superseded("t2") {
			t.Error("a cancelled call fenced its thread")
		}

		err := <-hw.call(context.Background(), "t1")
		if !errors.Is(err, errLapsed) {
			t.Fatalf("the call without a heartbeat: %v, want lapsed", err)
		}
		if waited := time.Since(last); waited != MissedHeartbeats*heardInterval {
			t.Errorf("refused %v after the last heartbeat, want when the lease lapsed (%v)", waited, MissedHeartbeats*heardInterval)
		}
		if cause := context.Cause(hw.hosts["t1"].ctx); !errors.Is(cause, errLapsed) {
			t.Errorf("the thread was not stopped: %v", cause)
		}
	})
}

// TestHeartbeatJitterNeverRefuses: heartbeats late by up to a fifth of an
// interval never hold a call; late by up to one and a half intervals, they
// may hold one until the next heartbeat, but none is refused.
func TestHeartbeatJitterNeverRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		late   time.Duration // the most a heartbeat is late
		holds  bool
		period time.Duration // between calls
	}{
		{"small jitter", heardInterval / 5, false, 70 * time.Millisecond},
		{"large jitter", 3 * heardInterval / 2, true, 70 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hw := newHeardWorker("t1")
				start := time.Now()
				hw.beat()
				stop := make(chan struct{})
				beats := make(chan struct{})
				go func() { // heartbeat k is sent at k intervals, late by a varying share of tc.late
					defer close(beats)
					for k := 1; ; k++ {
						late := tc.late * time.Duration((k*7)%11) / 10
						select {
						case <-stop:
							return
						case <-time.After(time.Until(start.Add(time.Duration(k)*heardInterval + late))):
						}
						hw.beat()
					}
				}()
				held := 0
				for range 200 {
					time.Sleep(tc.period)
					asked := time.Now()
					if err := <-hw.call(context.Background(), "t1"); err != nil {
						t.Fatalf("a call refused under jitter %v: %v", tc.late, err)
					}
					if time.Since(asked) > 0 {
						held++
					}
				}
				close(stop)
				<-beats
				if (held > 0) != tc.holds {
					t.Errorf("%d of 200 calls held for a heartbeat", held)
				}
			})
		})
	}
}
