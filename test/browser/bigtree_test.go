package browser_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
)

// TestBigTree opens a finished run of 1,000 helpers (10,000 with
// FORMICA_BROWSER_HELPERS=10000) and checks that the page renders it
// whole, stays responsive (folding the root and scrolling answer) and
// keeps only the rows in view in the document. It logs the time to the
// first render and to the whole tree; BENCHMARKS.md records them. No
// assertion is made on time.
func TestBigTree(t *testing.T) {
	needBrowser(t)
	n := 1000
	if v := os.Getenv("FORMICA_BROWSER_HELPERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("FORMICA_BROWSER_HELPERS=%q: want a positive number", v)
		}
	}
	c := startCoord(t, coordOpts{heartbeat: "2s", extra: []string{"--placement-timeout", "2m", "--max-agent-threads", strconv.Itoa(n)}})
	// The root asks for its n helpers in one response.
	c.startWorker("w1", 256, "--max-tool-calls", strconv.Itoa(n))
	c.startWorker("w2", 256, "--max-tool-calls", strconv.Itoa(n))
	var task strings.Builder
	task.WriteString("Fan out:\n")
	for i := range n {
		fmt.Fprintf(&task, "- part %d\n", i)
	}
	id := c.submit(map[string]any{"id": "big-1", "task": task.String(), "agent_max_threads": n})
	rec := c.waitFinal(id)
	// A parent whose worker was presumed lost (this machine is loaded) is
	// placed again and spawns its helpers anew: the record then holds more
	// threads than n+1, and the page must show every one of them.
	total := len(rec.Threads)
	if rec.Status != event.Succeeded || total < n+1 {
		t.Fatalf("run %s with %d threads: %s", rec.Status, total, rec.Error)
	}
	if total > n+1 {
		t.Logf("the record holds %d threads: a thread was placed again", total)
	}

	p := newPage(t)
	if n > 1000 {
		p.timeout = 3 * time.Minute
	}
	p.open(c.api + "/#/runs/" + id)
	p.wait("the whole tree is there", fmt.Sprintf(`document.querySelector('#tree') && document.querySelector('#tree').dataset.final === 'true' &&
		Number(document.querySelector('#tree').dataset.threads) === %d`, total))
	p.wait("every event is replayed", `document.querySelector('#stream-state').dataset.state === 'ended'`)
	replayed := eval[int](p, `Number(document.querySelector('#tree').dataset.endedMs)`)
	first := eval[int](p, `Number(document.querySelector('#tree').dataset.firstRenderMs)`)
	whole := eval[int](p, `Number(document.querySelector('#tree').dataset.finalMs)`)
	inDOM := eval[int](p, `document.querySelectorAll('[data-thread-id]').length`)
	rows := eval[int](p, `Number(document.querySelector('#tree').dataset.rows)`)
	if rows != total || inDOM >= rows || inDOM == 0 {
		t.Errorf("%d rows, %d of them in the document: want only those in view", rows, inDOM)
	}
	if limit := eval[string](p, `document.querySelector('#limit-threads .val').textContent`); limit != fmt.Sprintf("0 / %d", n) {
		t.Errorf("live helpers against the run's agent_max_threads: %q, want 0 / %d", limit, n)
	}
	// Responsive: scrolling to the end shows the last helper; folding the
	// root leaves one row.
	scroll := eval[float64](p, `(async () => { const t0 = performance.now(); const s = document.querySelector('#tree');
		s.scrollTop = s.scrollHeight; await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
		return performance.now() - t0; })()`)
	p.wait("the last row is in view", fmt.Sprintf(`document.querySelector('[data-row="%d"][data-thread-path^="formica/part-"]') !== null`, total-1))
	if total == n+1 {
		p.wait("the last helper called is the last row", fmt.Sprintf(`document.querySelector('[data-row="%d"][data-thread-path="formica/part-%d"]') !== null`, n, n-1))
	}
	eval[int](p, `document.querySelector('#tree').scrollTop = 0`)
	p.wait("the root is in view again", `document.querySelector('[data-thread-path="formica"] [data-toggle]') !== null`)
	fold := eval[float64](p, `(async () => { const t0 = performance.now();
		document.querySelector('[data-thread-path="formica"] [data-toggle]').click();
		await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
		return performance.now() - t0; })()`)
	p.wait("the folded tree has one row", `document.querySelectorAll('[data-thread-id]').length === 1`)
	t.Logf("%d helpers: first render %d ms, whole tree %d ms, all events replayed %d ms, scroll to the end %.0f ms, fold the root %.0f ms; %d of %d rows in the document",
		n, first, whole, replayed, scroll, fold, inDOM, rows)
}
