package transport_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/memtransport"
	"github.com/formica-run/formica/internal/wire"
)

// Each case runs on a synctest bubble's fake clock over an in-memory
// transport, so a loss window is waited for exactly and at once.

const idle = 3 * time.Second

type longRig struct {
	net    *memtransport.Network
	client *memtransport.Transport
	server *memtransport.Transport
	asked  atomic.Int32
}

func newLongRig(t *testing.T, h func(ctx context.Context, n int32, r transport.Replier)) *longRig {
	g := &longRig{net: memtransport.NewNetwork()}
	g.client, g.server = g.net.Transport(memtransport.Config{}), g.net.Transport(memtransport.Config{})
	t.Cleanup(func() { g.client.Close(); g.server.Close() })
	if h != nil {
		if _, err := g.server.Serve("long", "", 0, func(ctx context.Context, _ wire.Msg, r transport.Replier) {
			h(ctx, g.asked.Add(1), r)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

var (
	progress = wire.Message(wire.TypeProgress, wire.Progress{})
	answer   = wire.Message(wire.TypeOK, struct{}{})
)

// long is a request on subject "long" whose answer is an OK.
func (g *longRig) long() *transport.Long {
	return &transport.Long{
		Subject: "long",
		Request: func() wire.Msg { return wire.Message(wire.TypeRunCancel, wire.RunCancel{RunID: "r"}) },
		Reply: func(m wire.Msg) transport.Verdict {
			switch wire.Type(m.Type) {
			case wire.TypeProgress:
				return transport.Alive
			case wire.TypeOK:
				return transport.Final
			}
			return transport.Ignore
		},
		Idle: func() time.Duration { return idle },
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func TestLongKeptAliveThenAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newLongRig(t, func(ctx context.Context, _ int32, r transport.Replier) {
			for range 10 {
				if !sleep(ctx, idle-time.Millisecond) {
					return
				}
				r.Reply(progress)
			}
			r.Reply(answer)
			r.Reply(answer) // one answer counts
		})
		begun := time.Now()
		var ends atomic.Int32
		l := g.long()
		l.End = func(error) { ends.Add(1) }
		if err := l.Ask(context.Background(), g.client); err != nil {
			t.Fatal(err)
		}
		if took, want := time.Since(begun), 10*(idle-time.Millisecond); took != want {
			t.Errorf("answered after %v, want %v", took, want)
		}
		synctest.Wait()
		if ends.Load() != 1 {
			t.Errorf("ended %d times, want once", ends.Load())
		}
	})
}

func TestLongSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newLongRig(t, func(ctx context.Context, _ int32, r transport.Replier) {
			r.Reply(progress)
			<-ctx.Done()
		})
		begun := time.Now()
		err := g.long().Ask(context.Background(), g.client)
		if !errors.Is(err, transport.ErrSilent) || time.Since(begun) != idle {
			t.Errorf("after %v: %v, want silent after %v", time.Since(begun), err, idle)
		}
	})
}

// Tolerate bears a silence until the time it says, and is asked again then.
func TestLongTolerated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newLongRig(t, func(ctx context.Context, _ int32, _ transport.Replier) { <-ctx.Done() })
		begun := time.Now()
		var asked int
		l := g.long()
		l.Tolerate = func(heard, now time.Time) time.Time {
			asked++
			if now.Sub(heard) >= time.Minute {
				return time.Time{}
			}
			return now.Add(time.Second)
		}
		err := l.Ask(context.Background(), g.client)
		if !errors.Is(err, transport.ErrSilent) || time.Since(begun) != time.Minute {
			t.Errorf("after %v: %v, want silent after a minute", time.Since(begun), err)
		}
		if want := 1 + int(time.Minute-idle)/int(time.Second); asked != want {
			t.Errorf("Tolerate asked %d times, want %d", asked, want)
		}
	})
}

// A request silent since the connection moved is asked again, once per
// move; without a move the silence is the answerer's.
func TestLongAskedAgainAfterMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newLongRig(t, func(_ context.Context, _ int32, r transport.Replier) { r.Reply(answer) })
		// The first request is lost with the server it went to.
		var dropped atomic.Bool
		g.net.SetDrop(func(subject string, _ wire.Msg) bool {
			return subject == "long" && dropped.CompareAndSwap(false, true)
		})
		var moves atomic.Uint64
		l := g.long()
		l.Moves = moves.Load
		begun := time.Now()
		go func() {
			time.Sleep(time.Second)
			moves.Add(1)
		}()
		if err := l.Ask(context.Background(), g.client); err != nil {
			t.Fatal(err)
		}
		if time.Since(begun) != idle || g.asked.Load() != 1 {
			t.Errorf("answered after %v, asked %d times; want after %v, the answerer asked once", time.Since(begun), g.asked.Load(), idle)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newLongRig(t, func(context.Context, int32, transport.Replier) {})
		var moves atomic.Uint64
		l := g.long()
		l.Moves = moves.Load
		if err := l.Ask(context.Background(), g.client); !errors.Is(err, transport.ErrSilent) || g.asked.Load() != 1 {
			t.Errorf("no move: %v, asked %d times; want silent, asked once", err, g.asked.Load())
		}
	})
}

// A cancel is told to the answerer once; without a grace the request ends
// at once, with one it waits for the answer the cancel asks for, up to the
// grace.
func TestLongCancel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grace   time.Duration
		answers bool
		want    error
		took    time.Duration
	}{
		{"no grace", 0, true, transport.ErrCancelled, 0},
		{"answered", idle, true, nil, time.Second},
		{"unanswered", idle, false, transport.ErrCancelled, idle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stop := make(chan struct{}, 1)
				g := newLongRig(t, func(ctx context.Context, _ int32, r transport.Replier) {
					select {
					case <-ctx.Done():
						return
					case <-stop:
					}
					if tc.answers && sleep(ctx, time.Second) {
						r.Reply(answer)
					}
				})
				var told atomic.Int32
				l := g.long()
				l.Grace = tc.grace
				l.Cancel = func(cause error) {
					told.Add(1)
					if cause == nil || cause.Error() != "enough" {
						t.Errorf("cancel's cause %v", cause)
					}
					stop <- struct{}{}
				}
				ctx, cancel := context.WithCancelCause(context.Background())
				time.AfterFunc(time.Second, func() { cancel(errors.New("enough")) })
				begun := time.Now()
				err := l.Ask(ctx, g.client)
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Errorf("ended with %v, want %v", err, tc.want)
				}
				if took := time.Since(begun) - time.Second; took != tc.took {
					t.Errorf("ended %v after the cancel, want %v", took, tc.took)
				}
				if told.Load() != 1 {
					t.Errorf("told of the cancel %d times, want once", told.Load())
				}
			})
		})
	}
}

func TestLongNoResponders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newLongRig(t, nil)
		if err := g.long().Ask(context.Background(), g.client); !errors.Is(err, transport.ErrNoResponders) {
			t.Errorf("%v, want no responders", err)
		}
	})
}

// Again sends the request anew, built again.
func TestLongAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newLongRig(t, func(_ context.Context, n int32, r transport.Replier) {
			if n == 1 {
				r.Reply(wire.Message(wire.TypeExecSetupMissing, wire.ExecSetupMissing{}))
				return
			}
			r.Reply(answer)
		})
		built := 0
		l := g.long()
		request := l.Request
		l.Request = func() wire.Msg { built++; return request() }
		reply := l.Reply
		l.Reply = func(m wire.Msg) transport.Verdict {
			if wire.Type(m.Type) == wire.TypeExecSetupMissing {
				return transport.Again
			}
			return reply(m)
		}
		if err := l.Ask(context.Background(), g.client); err != nil || built != 2 || g.asked.Load() != 2 {
			t.Errorf("%v, built %d, asked %d; want answered, built and asked twice", err, built, g.asked.Load())
		}
	})
}
