package durable_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/record"
)

// TestResultLargerThanNATSMessage: a leaf helper (scripted) answers 2 MiB of
// text, twice the NATS max payload; the root (sim) returns it in its own
// output. The whole of it comes back through every path: the record read by
// GET /v1/runs/{id} and `formica get --json`, `formica submit --wait`, and
// `formica run --nats` (which gets the record straight from the coordinator).
// Then a task as large, both ways between worker and coordinator: a root
// (scripted) hands a helper (sim) a 1.5 MiB task in its spawn request,
// which reaches the helper's worker in its exec request, and the helper's
// answer, as large, comes back to the root: its transcript holds it whole.
// Each worker writes into its own place of the transfers stream, the
// coordinator into the worker's it sends to.
func TestResultLargerThanNATSMessage(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 4)
	c.startWorker("w2", 4)

	// One line (the sim root indents the lines of a multi-line result),
	// marked at both ends so a cut shows.
	big := "BEGIN-" + strings.Repeat("0123456789abcdef", (2<<20)/16) + "-END"
	script := writeFile(t, "big.yaml", "responses:\n  - when: big-leaf\n    text: "+big+"\n")
	agent := map[string]any{"name": "formica", "model": "sim", "tools": []string{"agent"},
		"helper": map[string]any{"model": "scripted:" + script}}
	agentJSON, _ := json.Marshal(agent)
	agentFile := writeFile(t, "agent.json", string(agentJSON))
	const task = "Big:\n- big-leaf"
	want := "big-leaf: " + big

	check := func(how string, got string) {
		t.Helper()
		switch {
		case got == want:
		case len(got) < 4096:
			t.Errorf("%s: output %q, want %d bytes", how, got, len(want))
		default:
			t.Errorf("%s: output of %d bytes (%q…%q), want %d bytes", how, len(got), got[:24], got[len(got)-8:], len(want))
		}
	}

	id := c.submit(map[string]any{"task": task, "agent": agent})
	rec := c.waitFinal(id)
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s (%s)", id, rec.Status, rec.Error)
	}
	check("GET /v1/runs/"+id, rec.Output)
	var viaCLI record.Run
	c.cliJSON(&viaCLI, "get", id, "--json")
	check("formica get --json", viaCLI.Output)
	if r := c.cli("get", id); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("formica get %s: exit %d, %d bytes of stdout without the whole output", id, r.code, len(r.stdout))
	}
	// The run.finished event carries a clip of it; the record has all.
	events, code, _ := c.sse(id, 0, 0)
	if code != http.StatusOK || len(events) == 0 {
		t.Fatalf("events of %s: status %d", id, code)
	}
	if fin := events[len(events)-1].e; fin.Type != event.RunFinished || !strings.HasPrefix(want, strings.TrimSuffix(fin.Output, "…")) {
		t.Errorf("last event %s with %d bytes of output, want run.finished with a prefix of the output", fin.Type, len(fin.Output))
	}

	r := c.cli("submit", "--wait", "--agent", agentFile, task)
	if r.code != 0 {
		t.Fatalf("formica submit --wait: exit %d: %s", r.code, r.stderr)
	}
	check("formica submit --wait", strings.TrimSuffix(r.stdout, "\n"))

	r = c.cli("run", "--nats", c.url, "--json", "--agent", agentFile, task)
	var direct record.Run
	if err := json.Unmarshal([]byte(r.stdout), &direct); err != nil || r.code != 0 {
		t.Fatalf("formica run --nats: exit %d, %v: %s", r.code, err, r.stderr)
	}
	check(fmt.Sprintf("formica run --nats (run %s)", direct.RunID), direct.Output)

	bigTask := "TASK-" + strings.Repeat("fedcba9876543210", (3<<19)/16) + "-END"
	root := writeFile(t, "root.yaml", "responses:\n  - tool_calls: [{name: agent, arguments: {name: huge, task: "+bigTask+"}}]\n  - text: handed over\n")
	id = c.submit(map[string]any{"task": "Hand the big task over", "agent": map[string]any{
		"name": "formica", "model": "scripted:" + root, "tools": []string{"agent"}, "helper": map[string]any{"model": "sim"}}})
	if rec := c.waitFinal(id); rec.Status != event.Succeeded || rec.Output != "handed over" || len(rec.Threads) != 2 {
		t.Fatalf("run %s: %s (%s), %d threads, output %q", id, rec.Status, rec.Error, len(rec.Threads), rec.Output)
	}
	code, body, err := c.do(http.MethodGet, "/v1/runs/"+id+"/threads/"+journal.RootID(id), nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("root transcript: %d %v", code, err)
	}
	if !strings.Contains(string(body), "done: "+bigTask) {
		t.Errorf("the root's transcript (%d bytes) does not hold the helper's whole answer", len(body))
	}
}
