package limits

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCeilingsCheck(t *testing.T) {
	c := Ceilings{}
	cases := []struct {
		name string
		ask  Ask
		want string
	}{
		{"defaults fit", Ask{TaskBytes: 10}, ""},
		{"threads", Ask{Limits: Config{MaxThreads: 80_000}}, "agent_max_threads 80000 is above the ceiling of 256 (coordinator --max-agent-threads)"},
		{"depth", Ask{Limits: Config{MaxDepth: 17}}, "agent_max_depth 17 is above the ceiling of 16 (coordinator --max-agent-depth)"},
		{"spawns", Ask{Budget: Budget{Spawns: 10_001}}, "budget.spawns 10001 is above the ceiling of 10000 (coordinator --max-spawns)"},
		{"task", Ask{TaskBytes: 300 << 10}, "task 307200 bytes is above the ceiling of 262144 bytes (coordinator --max-task-bytes)"},
		{"timeout", Ask{Timeout: 25 * time.Hour}, "timeout 25h0m0s is above the ceiling of 24h0m0s (coordinator --max-run-timeout)"},
		{"negative", Ask{Budget: Budget{Tokens: -1}}, "budget amounts must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Check(tc.ask)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrBadConfig) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	raised := Ceilings{MaxThreads: 100_000, MaxSpawns: 100_000}
	if err := raised.Check(Ask{Limits: Config{MaxThreads: 80_000}, Budget: Budget{Spawns: 80_000}}); err != nil {
		t.Fatal(err)
	}
	if got := c.Spawns(Budget{}); got != DefaultCeilingSpawns {
		t.Fatalf("spawns without budget = %d", got)
	}
	if got := c.Spawns(Budget{Spawns: 5}); got != 5 {
		t.Fatalf("spawns with budget = %d", got)
	}
}

func TestSpawnBudgetAndHelperBudget(t *testing.T) {
	tree := NewTree(Budget{Spawns: 3}, nil)
	root := tree.Root()
	helper := root.Child(Budget{Spawns: 1})
	if err := root.Spawn(); err != nil { // the helper itself
		t.Fatal(err)
	}
	if err := helper.Spawn(); err != nil { // the helper's one child
		t.Fatal(err)
	}
	var ex *Exhausted
	if err := helper.Spawn(); !errors.As(err, &ex) || ex.Kind != KindSpawns {
		t.Fatalf("helper's second spawn: %v", err)
	}
	if root.Spent() != nil {
		t.Fatal("a helper's spent budget marked the run's")
	}
	if err := root.Spawn(); err != nil {
		t.Fatal(err)
	}
	if err := root.Spawn(); !errors.As(err, &ex) || ex.Detail() != "budget exhausted (spawns): 3/3" {
		t.Fatalf("run's fourth spawn: %v", err)
	}
	if got := root.Use()[KindSpawns]; got != (Amount{Used: 3, Limit: 3}) {
		t.Fatalf("use = %+v", got)
	}
	r := &Refusal{Reason: ReasonBudget, Kind: KindSpawns}
	if r.Error() != "Agent budget exhausted (spawns). Solve the task yourself." {
		t.Fatal(r.Error())
	}
}

func TestDurationBudget(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	tree := NewTree(Budget{Duration: time.Minute}, clock)
	l := tree.Root().Lease()
	if g := l.Renew(Spend{}, 0); g.Spent != nil || g.Remaining != time.Minute {
		t.Fatalf("grant = %+v", g)
	}
	now = now.Add(time.Minute)
	g := l.Renew(Spend{}, 0)
	if g.Spent == nil || g.Spent.Detail() != "budget exhausted (duration): 1m0s/1m0s" {
		t.Fatalf("grant = %+v", g)
	}
	if err := tree.Root().Spawn(); err == nil {
		t.Fatal("spawn after the deadline")
	}
}

// TestDurationExpire: a node's duration budget ends at its start plus its
// duration; Expire, its owner's timer, marks it spent then, with the time
// it has run (never less than its duration), and a node without one has
// nothing to expire.
func TestDurationExpire(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	tree := NewTree(Budget{Duration: time.Minute}, clock)
	if got := tree.Root().Ends(); !got.Equal(now.Add(time.Minute)) {
		t.Fatalf("ends %v", got)
	}
	helper := tree.Root().Child(Budget{Tokens: 10})
	if !helper.Ends().IsZero() || helper.Expire() != nil || helper.Spent() != nil {
		t.Fatal("a node without a duration budget expires")
	}
	now = now.Add(time.Minute + time.Millisecond)
	e := tree.Root().Expire()
	if e == nil || e.Error() != "budget exhausted (duration)" || e.Detail() != "budget exhausted (duration): 1m0.001s/1m0s" {
		t.Fatalf("expire = %v", e)
	}
	if s := tree.Root().Spent(); s == nil || *s != *e {
		t.Fatalf("spent = %v", s)
	}
	if g := tree.Root().Lease().Renew(Spend{}, 0); g.Spent == nil || g.Spent.Kind != KindDuration {
		t.Fatalf("grant after expiry = %+v", g)
	}
	early := NewTree(Budget{Duration: time.Hour}, clock).Root()
	if e := early.Expire(); e == nil || e.Used != int64(time.Hour) {
		t.Fatalf("expired early: %+v", e)
	}
}

// TestTokenOvershootBound runs threads that each spend `call` tokens per
// model call against one token budget, all at once: the total never passes
// the budget by more than one call per thread (the calls in flight).
func TestTokenOvershootBound(t *testing.T) {
	const budget, call, threads = 10_000, 137, 8
	tree := NewTree(Budget{Tokens: budget}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls, renewals := 0, 0
	for range threads {
		wg.Go(func() {
			l := tree.Root().Lease()
			m := NewMeter(l.Renew(Spend{}, 0), func(_ context.Context, s Spend, need int64) (Grant, error) {
				mu.Lock()
				renewals++
				mu.Unlock()
				return l.Renew(s, need), nil
			}, nil)
			var ownIn, ownOut int64
			for {
				err := m.Before(context.Background(), Estimate{})
				if err != nil {
					var ex *Exhausted
					if !errors.As(err, &ex) || ex.Kind != KindTokens {
						t.Errorf("before: %v", err)
					}
					break
				}
				m.After(Spend{In: call / 2, Out: call - call/2})
				ownIn, ownOut = ownIn+call/2, ownOut+call-call/2
				mu.Lock()
				calls++
				mu.Unlock()
			}
			l.Close(Spend{In: ownIn, Out: ownOut})
		})
	}
	wg.Wait()
	used := tree.Root().Use()[KindTokens].Used
	if used != int64(calls*call) {
		t.Fatalf("used %d, calls %d", used, calls)
	}
	if used < budget || used > budget+threads*call {
		t.Fatalf("used %d of %d: overshoot beyond %d calls in flight", used, budget, threads)
	}
	if renewals >= calls {
		t.Fatalf("%d renewals for %d calls: leases saved nothing", renewals, calls)
	}
	t.Logf("%d calls, %d renewals, used %d of %d", calls, renewals, used, budget)
}

func BenchmarkMeterBefore(b *testing.B) {
	tree := NewTree(Budget{Tokens: Unlimited / 2}, nil)
	l := tree.Root().Lease()
	m := NewMeter(l.Renew(Spend{}, 0), func(_ context.Context, s Spend, need int64) (Grant, error) { return l.Renew(s, need), nil }, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Before(ctx, Estimate{}); err != nil {
			b.Fatal(err)
		}
		m.After(Spend{In: 100, Out: 10})
	}
}

// TestReusedWorkCountsOnce: a thread placed again settles what its journal
// says it spent (renewals already settled part of it), and a reused
// helper's subtree is charged without refusal; nothing counts twice.
func TestReusedWorkCountsOnce(t *testing.T) {
	tree := NewTree(Budget{Tokens: 1000, Spawns: 2}, nil)
	root := tree.Root()
	l := root.Lease()
	l.Renew(Spend{}, 0)
	l.Renew(Spend{In: 100, Out: 50}, 0) // the first placement settled 150 before its worker was lost
	l.Account(Spend{In: 300, Out: 60})  // its journal: 360 in all
	if got := root.Use()[KindTokens].Used; got != 360 {
		t.Fatalf("after Account: used %d, want 360", got)
	}
	l.Renew(Spend{}, 0)
	l.Renew(Spend{In: 40}, 0) // the new placement's own call
	l.Close(Spend{In: 340, Out: 60})
	if got := root.Use()[KindTokens].Used; got != 400 {
		t.Fatalf("after Close: used %d, want 400", got)
	}
	helper := root.Child(Budget{Tokens: 10})
	helper.Charge(Spend{In: 500, Out: 200}, 1) // reused helper, past its own budget: never refused
	if u := root.Use(); u[KindTokens].Used != 1100 || u[KindSpawns].Used != 1 {
		t.Fatalf("after Charge: %v", u)
	}
	if g := root.Lease().Renew(Spend{}, 0); g.Spent == nil || g.Spent.Kind != KindTokens {
		t.Fatalf("grant after the budget is spent by reused work: %+v", g)
	}
}
