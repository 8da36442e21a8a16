package embedded

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/model/scripted"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/runner"
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
// time than the chain takes: when the budget runs out the whole tree is
// cut, every thread it started failed with the budget's reason, and the run
// fails with the duration.
func TestDurationBudget(t *testing.T) {
	_, cl := startStack(t, 2, 4)
	sub := simSubmit(t, "Chain:\n- a\n  - b\n    - c\n      - d", 300, limits.Config{})
	sub.Budget = limits.Budget{Duration: 700 * time.Millisecond}
	start := time.Now()
	rec := runAsync(t, context.Background(), cl, sub, nil)()
	if rec.Status != event.Failed || !strings.HasPrefix(rec.Error, "budget exhausted (duration): ") || !strings.HasSuffix(rec.Error, "/700ms") {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	for _, th := range rec.Threads {
		if th.Status != event.Failed || th.Error != "budget exhausted (duration)" {
			t.Errorf("thread %s: %s %q", th.Name, th.Status, th.Error)
		}
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

// durationSlack is the slack docs/bounds.md gives a duration budget: a run
// ends, its record final, at most this long after its budget ran out,
// whatever its threads were doing.
const durationSlack = time.Second

// loadMargin is what TestDurationBudgetCutsCalls allows past the slack:
// its clock is the client's, which also counts the submission's way to the
// coordinator before the budget starts, and a loaded 2-core machine under
// -race may hold any of the goroutines the cut goes through. Without the
// cut each run here would end a minute late, so the margin takes nothing
// from what the test tells.
const loadMargin = 2 * time.Second

// sleeperModel answers its first turn with one bash call that writes its
// shell's pid to sleeper.pid and sleeps a minute, then "slept".
func sleeperModel(t *testing.T) runner.ModelOpener {
	m, err := scripted.Parse([]byte(`
responses:
  - tool_calls: [{name: bash, arguments: {command: "echo $$ > sleeper.pid; exec sleep 60"}}]
  - text: slept
`))
	if err != nil {
		t.Fatal(err)
	}
	return runner.ModelOpenerFunc(func(ref string) (model.Model, error) {
		if ref == "test:sleeper" {
			return m, nil
		}
		return providers.Open(ref)
	})
}

// TestDurationBudgetCutsCalls gives runs a 3s duration budget while their
// threads are in calls that would go on for a minute: the root in a model
// call, the root in a bash call (`sleep 60`), the root waiting on a helper
// in a model call. Each run ends failed with the budget's detail within the
// documented slack of its budget (plus loadMargin), every thread it
// started failed with the budget's reason, and nothing of it runs on: the
// sleep was killed and the workers host no thread.
func TestDurationBudgetCutsCalls(t *testing.T) {
	s, cl := startStackWith(t, 2, 4, sleeperModel(t))
	const budget = 3 * time.Second
	for _, tc := range []struct {
		name    string
		task    string
		sub     func(*wire.RunSubmit)
		threads int
	}{
		{"model call", "Think it over", func(sub *wire.RunSubmit) {
			sub.Agent.ModelArgs = model.Args{"latency_ms": 60_000}
		}, 1},
		{"tool call", "Sleep", func(sub *wire.RunSubmit) {
			sub.Agent.Model = "test:sleeper"
			sub.Agent.Harness.Permissions = policy.Permission{Default: policy.Allow}
		}, 1},
		{"waiting on a helper", "Ask:\n- a", func(sub *wire.RunSubmit) {
			sub.Agent.Helper.ModelArgs = model.Args{"latency_ms": 60_000}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sub := simSubmit(t, tc.task, 0, limits.Config{})
			tc.sub(&sub)
			sub.Budget = limits.Budget{Duration: budget}
			start := time.Now()
			rec := runAsync(t, context.Background(), cl, sub, nil)()
			overrun := time.Since(start) - budget
			t.Logf("ended %v after its budget: %s", overrun.Round(time.Millisecond), rec.Error)
			if rec.Status != event.Failed || !durationSpent.MatchString(rec.Error) {
				t.Fatalf("run: %s %q (output %q), want failed: budget exhausted (duration): <used>/3s", rec.Status, rec.Error, rec.Output)
			}
			if overrun > durationSlack+loadMargin {
				t.Errorf("the run ended %v after its budget, past the slack of %v (and a margin of %v for load)", overrun, durationSlack, loadMargin)
			}
			if len(rec.Threads) != tc.threads {
				t.Errorf("%d threads, want %d", len(rec.Threads), tc.threads)
			}
			for _, th := range rec.Threads {
				if th.Status != event.Failed || th.Error != "budget exhausted (duration)" {
					t.Errorf("thread %s: %s %q, want failed: budget exhausted (duration)", th.Name, th.Status, th.Error)
				}
			}
			if pid, err := os.ReadFile(filepath.Join(sub.Cwd, "sleeper.pid")); err == nil {
				n, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
				if n <= 0 || syscall.Kill(n, 0) != syscall.ESRCH {
					t.Errorf("the bash call's sleep (pid %q) still runs", pid)
				}
			} else if tc.name == "tool call" {
				t.Errorf("the bash call did not start: %v", err)
			}
		})
	}
	t.Cleanup(func() { waitWorkersIdle(t, s) })
}

var durationSpent = regexp.MustCompile(`^budget exhausted \(duration\): \S+/3s$`)

// TestHelperDurationBudgetCutsItsSubtree gives each helper a duration budget
// of its own, shorter than its model call: the helper is cut when its
// budget runs out, its parent is told it failed with the budget's reason,
// and the run, whose own budget is not spent, succeeds.
func TestHelperDurationBudgetCutsItsSubtree(t *testing.T) {
	_, cl := startStack(t, 1, 4)
	sub := simSubmit(t, "Ask:\n- a", 0, limits.Config{})
	sub.Agent.Helper.ModelArgs = model.Args{"latency_ms": 60_000}
	sub.Agent.Helper.Budget = limits.Budget{Duration: 500 * time.Millisecond}
	start := time.Now()
	rec := runAsync(t, context.Background(), cl, sub, nil)()
	took := time.Since(start)
	if rec.Status != event.Succeeded || rec.Output != "a: Helper a failed: budget exhausted (duration)" {
		t.Fatalf("run: %s %q, output %q", rec.Status, rec.Error, rec.Output)
	}
	if took > 500*time.Millisecond+durationSlack+loadMargin {
		t.Errorf("the run took %v: its helper was not cut at its budget's end", took)
	}
	if len(rec.Budget) != 1 { // the spawn ceiling only
		t.Errorf("the run's budget shows %+v", rec.Budget)
	}
}
