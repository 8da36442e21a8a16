package browser_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// A run with a failed thread (a helper past its subtree's token budget), a
// cancelled one (from the run page) and a spawn the run's budget refused
// shows the same totals in the terminal (formica watch), formica get
// --json, the API and the dashboard.
func TestTotalsAgree(t *testing.T) {
	p := newPage(t)
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 8)
	// Model calls take 10 s, so the cancel lands while three runs even on
	// a loaded machine. one and two each spawn a child, three runs on: the run's budget
	// admits four helpers, so one child is refused; a parent whose child
	// ran has spent its subtree's 700 tokens and fails at its next call.
	agent := slowAgent(10000) + "helper:\n  budget: {tokens: 700}\n"
	id := c.submit(map[string]any{"id": "totals-1", "task": "Parts:\n- one\n  - deep\n- two\n  - deeper\n- three",
		"agent": agent, "budget": map[string]any{"spawns": 4}})
	p.open(c.api + "/#/runs/" + id)
	p.wait("three runs", `document.querySelector('[data-thread-path="slow/three"][data-status="running"]') !== null`)
	p.clickButton(`[data-thread-path="slow/three"]`, "Cancel three")
	rec := c.waitFinal(id)
	p.wait("the tree is final", `document.querySelector('#tree').dataset.final === 'true'`)
	p.screenshot(t.Name())

	api := rec.Totals
	if api == nil {
		t.Fatalf("the API's record has no totals: %+v", rec)
	}
	if api.Failed == 0 || api.Cancelled == 0 || api.Refused == 0 || api.Done == 0 {
		t.Fatalf("totals %+v: want threads done, failed, cancelled and refused", *api)
	}
	want := fmt.Sprintf("%d done, %d running, %d failed, %d cancelled, %d refused", api.Done, api.Running, api.Failed, api.Cancelled, api.Refused)

	// The dashboard.
	dash := eval[string](p, `document.querySelector('#thread-totals').textContent`)
	if dash != strings.ReplaceAll(want, ", ", " · ") {
		t.Errorf("dashboard totals %q, want %q (the API's)", dash, want)
	}
	// formica get --json.
	creds := proc.Creds(t, bin.coordinator, c.data, "client", "cli")
	cli := func(args ...string) string {
		cmd := exec.Command(bin.formica, append(args, "--nats", c.url, "--nats-creds", creds)...)
		out, err := cmd.CombinedOutput()
		if _, failed := err.(*exec.ExitError); err != nil && !failed {
			t.Fatalf("formica %s: %v\n%s", args[0], err, out)
		}
		return string(out)
	}
	var got record.Run
	if out := cli("get", id, "--json"); json.Unmarshal([]byte(out), &got) != nil || got.Totals == nil || *got.Totals != *api {
		t.Errorf("formica get --json totals %+v, want the API's %+v\n%s", got.Totals, *api, out)
	}
	// The terminal: formica watch's totals line.
	out := cli("watch", id)
	if !strings.Contains(out, "threads: "+want+" · ") {
		t.Errorf("formica watch:\n%s\nwant the totals line with %q", out, want)
	}
	if !strings.Contains(out, "✗ run "+string(rec.Status)) && rec.Status != "succeeded" {
		t.Errorf("formica watch:\n%s\nwant the run's end (%s: %s) under the tree", out, rec.Status, rec.Error)
	}
}
