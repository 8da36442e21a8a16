package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
)

// The totals line counts cancelled threads apart from failed ones and the
// spawns every limit refused, the budget's included, as record.Run.Sum
// does for `formica get` and the API.
func TestTotalsLine(t *testing.T) {
	run := record.Run{
		Threads: []record.Thread{
			{Status: event.Succeeded, Usage: model.Usage{InputTokens: 7, OutputTokens: 3}},
			{Status: event.Succeeded}, {Status: event.Cancelled}, {Status: event.Failed},
			{Status: event.Running}, {Status: event.Waiting},
		},
		Refusals: record.Refusals{Depth: 1, Budget: 2},
	}
	got := totalsLine(run, 1500*time.Millisecond)
	want := "threads: 2 done, 1 running, 1 failed, 1 cancelled, 3 refused, 1 waiting · " +
		"run total 7 in, 3 out tokens · 1.5s · refused: 1 at the depth limit, 2 by the budget"
	if got != want {
		t.Errorf("totals line\n got %q\nwant %q", got, want)
	}
	sum := run.Sum()
	if sum != (record.Totals{Done: 2, Running: 1, Waiting: 1, Failed: 1, Cancelled: 1, Refused: 3, InputTokens: 7, OutputTokens: 3}) {
		t.Errorf("Sum %+v", sum)
	}
}

// On a narrow terminal the totals wrap at their separators, never cut.
func TestTotalsWrap(t *testing.T) {
	run := record.Run{Threads: make([]record.Thread, 51)}
	for i := range run.Threads {
		run.Threads[i].Status = event.Succeeded
	}
	run.Usage = model.Usage{InputTokens: 26762, OutputTokens: 300}
	got := totals(run, 5*time.Second, 50)
	want := []string{"threads: 51 done, 0 running, 0 failed,", "0 cancelled, 0 refused",
		"run total 26762 in, 300 out tokens · 5.0s"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("at 50 columns:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := totals(run, 5*time.Second, 120); len(got) != 1 {
		t.Errorf("at 120 columns: %q, want one line", got)
	}
}

// A run that failed with every thread's row green (its budget ran out)
// says so under the tree, before the totals, on a terminal or not.
func TestFailedRunBanner(t *testing.T) {
	run := record.Run{Status: event.Failed, Error: "budget exhausted (spawns): 2/2",
		Threads:  []record.Thread{{Name: "formica", Status: event.Succeeded}, {Name: "a", Depth: 1, Status: event.Succeeded}},
		Refusals: record.Refusals{Budget: 1}}
	for _, tty := range []bool{false, true} {
		var out strings.Builder
		v := newTreeView(&out, tty)
		v.color = false
		v.rec = record.NewRecorder(nil)
		v.start()
		v.finish(run)
		lines := strings.Split(out.String(), "\n")
		i := slices.Index(lines, "✗ run failed: budget exhausted (spawns): 2/2")
		if i < 0 || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "threads: 2 done") {
			t.Errorf("tty %v:\n%s\nwant the failure's banner, then the totals", tty, out.String())
		}
	}
	run.Status, run.Error = event.Succeeded, ""
	if b := banner(run); b != "" {
		t.Errorf("a run that succeeded has a banner %q", b)
	}
}

// With every call priced, the totals line ends with the cost; one call of
// a model with no price leaves it out.
func TestTotalsLineCost(t *testing.T) {
	priced := model.Usage{InputTokens: 2000, OutputTokens: 100, CacheReadTokens: 1500, CostUSD: 0.0123, Priced: 2}
	run := record.Run{Threads: []record.Thread{{Status: event.Succeeded, Usage: priced}}}
	got := totalsLine(run, time.Second)
	if want := "run total 2000 in, 100 out tokens · 1.0s · $0.0123"; !strings.HasSuffix(got, want) {
		t.Errorf("totals line %q, want it to end %q", got, want)
	}
	if sum := run.Sum(); sum.CostUSD == nil || *sum.CostUSD != 0.0123 || sum.CacheReadTokens != 1500 {
		t.Errorf("Sum %+v", sum)
	}
	run.Threads = append(run.Threads, record.Thread{Status: event.Succeeded, Usage: model.Usage{InputTokens: 5, Unpriced: 1}})
	if got := totalsLine(run, time.Second); strings.Contains(got, "$") {
		t.Errorf("totals line %q shows a cost with an unpriced call", got)
	}
}

// `formica runs` shows each run's cost so far, "-" before a model call or
// with an unpriced model; a usd budget's use shows in dollars.
func TestRunCostAndUSDBudget(t *testing.T) {
	priced := record.Run{Threads: []record.Thread{
		{Status: event.Succeeded, Usage: model.Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.0123, Priced: 1}},
		{Status: event.Running, Usage: model.Usage{InputTokens: 1, OutputTokens: 1, CostUSD: 0.5, Priced: 1}},
	}}
	for _, c := range []struct {
		run  record.Run
		want string
	}{
		{priced, "$0.5123"},
		{record.Run{}, "-"},
		{record.Run{Threads: []record.Thread{{Status: event.Succeeded, Usage: model.Usage{InputTokens: 7, Unpriced: 1}}}}, "-"},
		{record.Run{Usage: model.Usage{InputTokens: 9, CostUSD: 2, Priced: 3}}, "$2.0000"},
	} {
		if got := runCost(c.run); got != c.want {
			t.Errorf("runCost(%+v) = %q, want %q", c.run, got, c.want)
		}
	}
	use := limits.Use{limits.KindUSD: {Used: 1_020_000, Limit: 1_000_000}, limits.KindTokens: {Used: 5, Limit: 10}}
	if got, want := budgetLine(use), "tokens 5/10, usd $1.02/$1.00"; got != want {
		t.Errorf("budget line %q, want %q", got, want)
	}
}
