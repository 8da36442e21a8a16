package browser_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/limits"
)

// The run page's budget meters read the API's shape: each bounded kind
// shows what was used against its limit, numbers while the run runs and
// the record's own account once it has ended (durations as durations).
func TestBudgetMeters(t *testing.T) {
	p := newPage(t)
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 8)
	kinds := []string{"tokens", "input_tokens", "output_tokens", "duration", "spawns"}
	id := c.submit(map[string]any{"id": "budget-1", "task": "Two parts:\n- one\n- two", "agent": slowAgent(1500),
		"budget": map[string]any{"tokens": 100000, "input_tokens": 90000, "output_tokens": 50000, "duration": "10m", "spawns": 5}})
	p.open(c.api + "/#/runs/" + id)
	p.wait("both helpers run", `document.querySelectorAll('[data-thread-path^="slow/"][data-status="running"]').length === 2`)
	// The meters come with the run's record, which the page may fetch
	// after the first events.
	p.wait("the budget meters show", `document.querySelectorAll('[id^="budget-"]').length === 5`)
	number := regexp.MustCompile(`^(\d+|\d+ms|\d+\.\ds|\d+m\d\ds) / (\d+|10m00s)$`)
	for _, k := range kinds {
		if got := eval[string](p, fmt.Sprintf(`document.querySelector('#budget-%s .val').textContent`, k)); !number.MatchString(got) {
			t.Errorf("running: budget %s reads %q, want used / limit", k, got)
		}
	}
	rec := c.waitFinal(id)
	p.wait("the tree is final", `document.querySelector('#tree').dataset.final === 'true'`)
	p.screenshot(t.Name())
	for _, k := range kinds {
		a, ok := rec.Budget[limits.Kind(k)]
		if !ok {
			t.Fatalf("the record has no %s budget: %+v", k, rec.Budget)
		}
		show := func(n int64) string { return fmt.Sprint(n) }
		if k == "duration" {
			show = func(n int64) string { return jsDur(time.Duration(n) * time.Millisecond) }
		}
		want := show(a.Used) + " / " + show(a.Limit)
		if got := eval[string](p, fmt.Sprintf(`document.querySelector('#budget-%s .val').textContent`, k)); got != want {
			t.Errorf("final: budget %s reads %q, want %q", k, got, want)
		}
	}
}

// jsDur is the dashboard's dur (util.js).
func jsDur(d time.Duration) string {
	ms := d.Milliseconds()
	switch {
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", float64(ms)/1000)
	case ms < 3_600_000:
		s := ms / 1000
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	s := ms / 1000
	return fmt.Sprintf("%dh%02dm", s/3600, (s/60)%60)
}
