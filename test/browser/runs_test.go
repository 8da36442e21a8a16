package browser_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

const launchTask = "Plan a launch:\n- write the announcement\n- update the docs\n  - API reference\n  - tutorial\n- tell the team"

// TestSubmitFromFormShowsLiveTree submits a run from the Runs form and
// watches its tree fill in over two worker processes, then opens a
// helper's transcript.
func TestSubmitFromFormShowsLiveTree(t *testing.T) {
	p := newPage(t)
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 2)
	c.startWorker("w2", 2)

	p.open(c.api + "/")
	p.wait("the submit form shows", `document.querySelector('#submit-form') !== null`)
	p.typeInto("#submit-task", launchTask)
	p.typeInto("#submit-agent", slowAgent(400))
	p.typeInto("#submit-id", "launch-1")
	p.click("#submit-button")

	// The page moves to the run; its tree fills in while it runs.
	p.wait("the run page shows", `location.hash === '#/runs/launch-1' && document.querySelector('#tree') !== null`)
	p.wait("a helper runs", `document.querySelector('[data-thread-path^="slow/"][data-status="running"]') !== null`)
	sawLive := eval[string](p, `document.querySelector('#stream-state').dataset.state`)
	p.wait("the tree is final", `document.querySelector('#tree').dataset.final === 'true'`)

	rec := c.waitFinal("launch-1")
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s", rec.Status, rec.Error)
	}
	rows := p.threadRows()
	if len(rows) != 6 || len(rec.Threads) != 6 {
		t.Fatalf("%d thread rows, %d threads in the record; want 6 (root and 5 helpers)\n%+v", len(rows), len(rec.Threads), rows)
	}
	workers := map[string]bool{}
	paths := []string{}
	for _, r := range rows {
		if r.Status != "succeeded" {
			t.Errorf("thread %s: %s, want succeeded", r.Path, r.Status)
		}
		workers[r.Worker] = true
		paths = append(paths, r.Path)
	}
	if len(workers) < 2 || workers[""] {
		t.Errorf("workers shown %v: want both w1 and w2", workers)
	}
	slices.Sort(paths)
	want := []string{"slow", "slow/tell-the-team", "slow/update-the-docs", "slow/update-the-docs/api-reference",
		"slow/update-the-docs/tutorial", "slow/write-the-announcement"}
	if !slices.Equal(paths, want) {
		t.Errorf("thread paths %v, want %v", paths, want)
	}
	t.Logf("stream indicator while running: %s", sawLive)

	// A spawn past the depth limit shows under the thread that asked, with
	// its reason, and the limits the run was given are the ones shown.
	c.submit(map[string]any{"id": "refused-1", "task": "Deep:\n- a\n  - b", "agent_max_depth": 1})
	refused := c.waitFinal("refused-1")
	p.open(c.api + "/#/runs/refused-1")
	p.wait("the tree is final", `document.querySelector('#tree') && document.querySelector('#tree').dataset.final === 'true'`)
	var a string
	for _, th := range refused.Threads {
		if th.Name == "a" {
			a = th.ID
		}
	}
	p.wait("the refused spawn shows under a", fmt.Sprintf(`document.querySelector('[data-refused="depth"][data-parent-id=%q]') !== null`, a))
	if got := eval[string](p, `document.querySelector('#limit-depth .val').textContent`); got != "1 / 1" || refused.Refusals.Depth != 1 {
		t.Errorf("deepest against agent_max_depth: %q (record: %d depth refusals), want 1 / 1", got, refused.Refusals.Depth)
	}

	// The Runs list shows the run with its hooks.
	p.open(c.api + "/#/")
	p.wait("the run is listed as succeeded", `document.querySelector('[data-run-id="launch-1"][data-status="succeeded"]') !== null`)

	// A helper's transcript: its task and its own tool calls' arguments.
	var docs record.Thread
	for _, th := range rec.Threads {
		if th.Name == "update-the-docs" {
			docs = th
		}
	}
	p.open(fmt.Sprintf("%s/#/runs/launch-1/threads/%s", c.api, docs.ID))
	p.wait("the helper's task shows", `document.querySelector('#thread-task') && document.querySelector('#thread-task').innerText.includes('API reference')`)
	p.wait("a tool call's arguments show", `[...document.querySelectorAll('.tool-call pre.args')].some(e => e.innerText.includes('"task"') && e.innerText.includes('tutorial'))`)
	args := eval[string](p, `[...document.querySelectorAll('.tool-call pre.args')].map(e => e.innerText).join('\n')`)
	if !strings.Contains(args, `"name": "api-reference"`) && !strings.Contains(args, `"name": "tutorial"`) {
		t.Errorf("tool call arguments shown:\n%s", args)
	}
	// Where the coordinator serves journal transcripts, the page shows the
	// transcript too: the task as the helper got it and its calls.
	if status, _ := c.do("GET", "/v1/runs/launch-1/threads/"+docs.ID, nil); status == 200 {
		p.wait("the journal transcript shows the task", `document.querySelector('#journal .task-text') &&
			document.querySelector('#journal .task-text').innerText.includes('API reference')`)
		p.wait("the journal transcript shows a tool call's arguments", `[...document.querySelectorAll('#journal pre.args')].some(e => e.innerText.includes('"task"'))`)
	}
}

// TestCancelFromRunPage cancels a subtree with its row's button (the rest
// of the run goes on), then a whole running run with its button: every
// thread ends cancelled.
func TestCancelFromRunPage(t *testing.T) {
	p := newPage(t)
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 8)

	// Each model call takes 6 s, so the cancel lands while the deep helper
	// runs even when the page is slow to see it running.
	sub := c.submit(map[string]any{"id": "subtree-1", "task": "Two parts:\n- one\n  - deep\n- two", "agent": slowAgent(6000)})
	p.open(c.api + "/#/runs/" + sub)
	p.wait("the deep helper runs", `document.querySelector('[data-thread-path="slow/one/deep"][data-status="running"]') !== null`)
	p.screenshot(t.Name() + "-subtree")
	p.clickButton(`[data-thread-path="slow/one"]`, "Cancel one")
	p.wait("the subtree is cancelled", `document.querySelector('[data-thread-path="slow/one"]').dataset.status === 'cancelled' &&
		document.querySelector('[data-thread-path="slow/one/deep"]').dataset.status === 'cancelled'`)
	rec := c.waitFinal(sub)
	p.wait("the tree is final", `document.querySelector('#tree').dataset.final === 'true'`)
	statuses := map[string]string{}
	for _, r := range p.threadRows() {
		statuses[r.Path] = r.Status
	}
	want := map[string]string{"slow": "succeeded", "slow/one": "cancelled", "slow/one/deep": "cancelled", "slow/two": "succeeded"}
	if fmt.Sprint(statuses) != fmt.Sprint(want) || rec.Status != event.Succeeded {
		t.Errorf("after cancelling slow/one: run %s, threads %v; want the run succeeded and %v", rec.Status, statuses, want)
	}
	if !strings.Contains(rec.Output, "Helper one failed") {
		t.Errorf("the root's output %q: want it to have seen its helper fail", rec.Output)
	}

	id := c.submit(map[string]any{"id": "slow-1", "task": "Take your time:\n- one\n- two", "agent": slowAgent(4000)})

	p.open(c.api + "/#/runs/" + id)
	p.wait("both helpers run", `document.querySelectorAll('[data-thread-path^="slow/"][data-status="running"]').length === 2`)
	p.click("#cancel-run")
	p.wait("every thread is cancelled", `document.querySelector('#tree').dataset.final === 'true' &&
		[...document.querySelectorAll('[data-thread-id]')].every(e => e.dataset.status === 'cancelled')`)
	p.wait("the run shows cancelled", `document.querySelector('#run-status').dataset.status === 'cancelled'`)
	if rec := c.waitFinal(id); rec.Status != event.Cancelled || len(rec.Threads) != 3 {
		b, _ := json.Marshal(rec.Threads)
		t.Errorf("record: %s with threads %s", rec.Status, b)
	}
}
