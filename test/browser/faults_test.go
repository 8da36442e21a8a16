package browser_test

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
)

// TestWorkerLossShowsReplacement kills a worker process that runs a
// helper: it leaves the Workers view, and its thread shows that it was
// placed again on the other worker.
func TestWorkerLossShowsReplacement(t *testing.T) {
	p := newPage(t)
	c := startCoord(t, coordOpts{})
	procs := map[string]interface{ Kill(testing.TB) }{"w1": c.startWorker("w1", 4), "w2": c.startWorker("w2", 4)}
	id := c.submit(map[string]any{"id": "loss-1", "task": "Split:\n- one\n- two\n- three\n- four", "agent": slowAgent(2500)})

	p.open(c.api + "/#/runs/" + id)
	p.wait("helpers run on both workers", `(() => {
		const rows = [...document.querySelectorAll('[data-thread-path^="slow/"][data-status="running"]')];
		return rows.length === 4 && new Set(rows.map(r => r.dataset.worker)).size === 2; })()`)
	rootWorker := eval[string](p, `document.querySelector('[data-thread-path="slow"]').dataset.worker`)
	victim := "w1"
	if rootWorker == "w1" {
		victim = "w2"
	}
	other := map[string]string{"w1": "w2", "w2": "w1"}[victim]

	p.open(c.api + "/#/workers")
	p.wait("both workers are listed with their threads", fmt.Sprintf(`document.querySelectorAll('[data-worker-id]').length === 2 &&
		document.querySelector('[data-worker-id=%q] .chip') !== null`, victim))
	p.screenshot(t.Name() + "-before")
	procs[victim].Kill(t)
	p.wait(victim+" leaves the Workers view", fmt.Sprintf(`document.querySelector('[data-worker-id=%q]') === null &&
		document.querySelector('[data-worker-id=%q]') !== null`, victim, other))

	p.open(c.api + "/#/runs/" + id)
	p.wait("a thread shows it was placed again", fmt.Sprintf(`[...document.querySelectorAll('[data-thread-id]')].some(e =>
		Number(e.dataset.placements) >= 2 && e.dataset.worker === %q && e.innerText.includes(%q))`, other, victim+" → "+other))
	rec := c.waitFinal(id)
	p.wait("the tree is final", `document.querySelector('#tree').dataset.final === 'true'`)
	if rec.Status != event.Succeeded {
		t.Errorf("run %s: %s", rec.Status, rec.Error)
	}
	for _, th := range rec.Threads {
		if th.Worker == victim {
			t.Errorf("thread %s still on the lost worker %s in the record", th.Name, victim)
		}
	}
}

// TestStreamDropReconnects cuts the connection between browser and
// coordinator mid-run: the indicator says reconnecting, and once the
// connection is back the page has every event exactly once and its tree
// equals the run's record.
func TestStreamDropReconnects(t *testing.T) {
	p := newPage(t)
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 8)
	px := startProxy(t, strings.TrimPrefix(c.api, "http://"))
	id := c.submit(map[string]any{"id": "drop-1", "task": "Split:\n- one\n- two\n- three\n  - deeper\n- four", "agent": slowAgent(1500)})

	p.open("http://" + px.addr() + "/#/runs/" + id)
	p.wait("the stream is live and a helper runs", `document.querySelector('#stream-state').dataset.state === 'live' &&
		document.querySelector('[data-thread-path^="slow/"][data-status="running"]') !== null`)
	px.block()
	p.wait("the indicator says reconnecting", `document.querySelector('#stream-state').dataset.state === 'reconnecting'`)
	p.screenshot(t.Name() + "-reconnecting")
	// The run goes on, and ends, while the page cannot see it.
	rec := c.waitFinal(id)
	px.unblock()
	p.wait("the tree is final", `document.querySelector('#tree').dataset.final === 'true'`)
	p.wait("the indicator says the stream ended", `document.querySelector('#stream-state').dataset.state === 'ended'`)

	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s", rec.Status, rec.Error)
	}
	rows := p.threadRows()
	got, want := []string{}, []string{}
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %s %s", r.ID, r.Path, r.Status, r.Worker))
	}
	paths := map[string]string{}
	for _, th := range rec.Threads {
		path := "slow"
		if th.ParentID != "" {
			path = paths[th.ParentID] + "/" + th.Name
		}
		paths[th.ID] = path
		want = append(want, fmt.Sprintf("%s %s %s %s", th.ID, path, th.Status, th.Worker))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("tree after reconnecting:\n%s\nrecord:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every event once: the page applied as many as the stream holds.
	if n, seen := countEvents(t, c, id), eval[int](p, `Number(document.querySelector('#tree').dataset.events)`); n != seen {
		t.Errorf("the page applied %d events, the run has %d", seen, n)
	}
}

// countEvents reads the run's whole event stream from the API.
func countEvents(t *testing.T, c *coord, id string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", c.api+"/v1/runs/"+id+"/events", nil)
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	n := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	return n
}
