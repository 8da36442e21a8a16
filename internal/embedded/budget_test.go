package embedded

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/wire"
)

// calls records the model calls and tool results of a run, by thread.
type calls struct {
	mu      sync.Mutex
	max     int64            // largest single call's tokens
	total   int64            // tokens of every call
	workers map[string]bool  // workers that ran a thread
	results []string         // tool results
	byName  map[string]int64 // tokens per thread name
}

func newCalls() *calls { return &calls{workers: map[string]bool{}, byName: map[string]int64{}} }

func (c *calls) Emit(e event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Type {
	case event.ModelCall:
		n := e.Usage.InputTokens + e.Usage.OutputTokens
		c.max, c.total = max(c.max, n), c.total+n
		c.byName[e.Name] += n
	case event.ThreadStarted:
		c.workers[e.Worker] = true
	case event.ToolResult:
		c.results = append(c.results, e.Output)
	}
}

var exhaustedText = regexp.MustCompile(`^budget exhausted \(tokens\): (\d+)/(\d+)$`)

// TestTokenBudgetAcrossThreeWorkers spreads a tree over three workers
// with less tokens than it needs: the run fails with the exact text, its
// use past the budget is at most one model call per thread that can be in
// flight (one, when tool calls run one by one; every thread, when they run
// in parallel), and the record shows the use.
func TestTokenBudgetAcrossThreeWorkers(t *testing.T) {
	_, cl := startStack(t, 3, 2)
	task := "Jobs:\n- j1\n  - j1a\n  - j1b\n- j2\n  - j2a\n- j3\n- j4\n- j5\n- j6"
	for _, tc := range []struct {
		name     string
		parallel bool
		share    int64 // the budget is the unbounded run's tokens / share
	}{{"sequential", false, 2}, {"parallel", true, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			submit := func() wire.RunSubmit {
				sub := simSubmit(t, task, 20, limits.Config{})
				sub.Agent.ParallelToolCalls = &tc.parallel
				return sub
			}
			free := newCalls()
			rec := runAsync(t, context.Background(), cl, submit(), free)()
			if rec.Status != event.Succeeded {
				t.Fatalf("unbounded run: %s %s", rec.Status, rec.Error)
			}
			budget := free.total / tc.share
			sub := submit()
			sub.Budget = limits.Budget{Tokens: budget}
			got := newCalls()
			rec = runAsync(t, context.Background(), cl, sub, got)()
			m := exhaustedText.FindStringSubmatch(rec.Error)
			if rec.Status != event.Failed || m == nil {
				t.Fatalf("run: %s %q, want failed with budget exhausted (tokens): used/limit", rec.Status, rec.Error)
			}
			used, _ := strconv.ParseInt(m[1], 10, 64)
			limit, _ := strconv.ParseInt(m[2], 10, 64)
			inFlight := int64(1)
			if tc.parallel {
				inFlight = int64(len(rec.Threads))
			}
			if limit != budget || used < limit || used > limit+inFlight*got.max || used != got.total {
				t.Fatalf("used %d (events %d) of %d: overshoot past %d calls of at most %d tokens", used, got.total, limit, inFlight, got.max)
			}
			if a := rec.Budget[limits.KindTokens]; a.Used != used || a.Limit != limit {
				t.Fatalf("record budget %+v", rec.Budget)
			}
			if len(got.workers) < 2 {
				t.Fatalf("threads ran on %d workers", len(got.workers))
			}
			failed := 0
			for _, th := range rec.Threads {
				if th.Error == "budget exhausted (tokens)" {
					failed++
				}
			}
			if failed == 0 {
				t.Fatalf("no thread failed with the budget's reason: %+v", rec.Threads)
			}
			t.Logf("budget %d of %d, used %d (largest call %d, %d threads, %d workers)", limit, free.total, used, got.max, len(rec.Threads), len(got.workers))
		})
	}
}

// TestSpawnBudget lets two of four helpers start: the other two get the
// exact tool result, and the run fails with "budget exhausted (spawns): 2/2".
func TestSpawnBudget(t *testing.T) {
	_, cl := startStack(t, 2, 4)
	sub := simSubmit(t, "Jobs:\n- j1\n- j2\n- j3\n- j4", 0, limits.Config{})
	sub.Agent.ParallelToolCalls = new(bool) // one by one: which two start is fixed
	sub.Budget = limits.Budget{Spawns: 2}
	got := newCalls()
	rec := runAsync(t, context.Background(), cl, sub, got)()
	if rec.Status != event.Failed || rec.Error != "budget exhausted (spawns): 2/2" {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	want := "j1: done: j1\nj2: done: j2\nj3: Agent budget exhausted (spawns). Solve the task yourself.\nj4: Agent budget exhausted (spawns). Solve the task yourself."
	if rec.Output != want {
		t.Fatalf("output:\n%s\nwant:\n%s", rec.Output, want)
	}
	if rec.Refusals.Budget != 2 || len(rec.Threads) != 3 || rec.Budget[limits.KindSpawns] != (limits.Amount{Used: 2, Limit: 2}) {
		t.Fatalf("refusals %+v, %d threads, budget %+v", rec.Refusals, len(rec.Threads), rec.Budget)
	}
}

// TestDurationBudget gives a chain of helpers, each model call 300ms, less
// time than the chain takes: the thread whose next call would start past it
// fails, the spawn past it is refused, and the run fails with the duration.
func TestDurationBudget(t *testing.T) {
	_, cl := startStack(t, 2, 4)
	sub := simSubmit(t, "Chain:\n- a\n  - b\n    - c\n      - d", 300, limits.Config{})
	sub.Budget = limits.Budget{Duration: 700 * time.Millisecond}
	got := newCalls()
	start := time.Now()
	rec := runAsync(t, context.Background(), cl, sub, got)()
	if rec.Status != event.Failed || !strings.HasPrefix(rec.Error, "budget exhausted (duration): ") || !strings.HasSuffix(rec.Error, "/700ms") {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	joined := strings.Join(got.results, "\n")
	if !strings.Contains(joined, "Agent budget exhausted (duration). Solve the task yourself.") &&
		!strings.Contains(joined, "failed: budget exhausted (duration)") {
		t.Fatalf("tool results:\n%s", joined)
	}
	if len(rec.Threads) >= 5 {
		t.Fatalf("the whole chain ran: %d threads", len(rec.Threads))
	}
	t.Logf("ended after %v: %s", time.Since(start).Round(time.Millisecond), rec.Error)
}

// TestHelperBudgetStopsOnlyItsSubtree gives every helper a token budget
// that one model call fits in but not three: helper a, whose own helper
// spends its subtree's tokens, fails with the exact text, while its sibling
// b finishes and the run succeeds.
func TestHelperBudgetStopsOnlyItsSubtree(t *testing.T) {
	_, cl := startStack(t, 2, 4)
	task := "Two:\n- a\n  - a1\n- b"
	free := newCalls()
	if rec := runAsync(t, context.Background(), cl, simSubmit(t, task, 0, limits.Config{}), free)(); rec.Status != event.Succeeded {
		t.Fatalf("unbounded run: %s", rec.Error)
	}
	sub := simSubmit(t, task, 0, limits.Config{})
	sub.Agent.Helper.Budget = limits.Budget{Tokens: free.byName["b"] + free.byName["a1"]/2}
	got := newCalls()
	rec := runAsync(t, context.Background(), cl, sub, got)()
	if rec.Status != event.Succeeded {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	want := "a: Helper a failed: budget exhausted (tokens)\nb: done: b"
	if rec.Output != want {
		t.Fatalf("output:\n%s\nwant:\n%s", rec.Output, want)
	}
	if rec.Budget[limits.KindTokens] != (limits.Amount{}) {
		t.Fatalf("the run's budget shows tokens: %+v", rec.Budget)
	}
}
