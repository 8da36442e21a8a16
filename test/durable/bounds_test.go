package durable_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// peakRSS is a process's peak resident memory (VmHWM) in bytes.
func peakRSS(t *testing.T, p *proc.Proc) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestCeilingsRefuseTheHugeRequest replays the request that asked for
// 80,000 helpers (a 790 KB task, agent_max_threads raised to match): the
// API refuses it with 400 naming the ceiling, the CLI with exit 2, nothing
// is queued, and the coordinator's peak memory does not move.
func TestCeilingsRefuseTheHugeRequest(t *testing.T) {
	c := startCoord(t, coordOpts{})
	var task strings.Builder
	task.WriteString("Do all of these:\n")
	for i := range 80_000 {
		fmt.Fprintf(&task, "- it%d\n", i)
	}
	before := peakRSS(t, c.p)
	body := map[string]any{"task": task.String(), "agent_max_threads": 80_000, "agent": simAgent(0)}
	code, data, err := c.do(http.MethodPost, "/v1/runs", body)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusBadRequest || !strings.Contains(string(data), "agent_max_threads 80000 is above the ceiling of 256 (coordinator --max-agent-threads)") {
		t.Fatalf("huge request: %d %s", code, data)
	}
	// Within the thread ceiling, the task is still past its own.
	body["agent_max_threads"] = 200
	code, data, _ = c.do(http.MethodPost, "/v1/runs", body)
	if code != http.StatusBadRequest || !strings.Contains(string(data), "above the ceiling of 262144 bytes (coordinator --max-task-bytes)") {
		t.Fatalf("huge task: %d %s", code, data)
	}
	for _, b := range []map[string]any{
		{"task": "x", "agent_max_depth": 17},
		{"task": "x", "budget": map[string]any{"spawns": 10_001}},
		{"task": "x", "timeout": "25h"},
	} {
		code, data, _ = c.do(http.MethodPost, "/v1/runs", b)
		if code != http.StatusBadRequest || !strings.Contains(string(data), "above the ceiling") {
			t.Fatalf("%v: %d %s", b, code, data)
		}
	}
	after := peakRSS(t, c.p)
	if grew := after - before; grew > 64<<20 {
		t.Fatalf("coordinator peak memory grew by %d MiB for a refused request", grew>>20)
	}
	t.Logf("coordinator peak memory %d MiB before, %d MiB after", before>>20, after>>20)

	r := c.cli("submit", "--agent-max-threads", "80000", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "above the ceiling of 256") {
		t.Fatalf("formica submit: exit %d, stderr %s", r.code, r.stderr)
	}
	var runs []map[string]any
	if c.getJSON("/v1/runs", &runs) != http.StatusOK || len(runs) != 0 {
		t.Fatalf("refused submissions were queued: %v", runs)
	}
}

// TestDeadlinesFreeRunSlots fills every run slot with runs stuck in slow
// model calls: their deadline (--run-timeout) ends them, failed with
// "deadline exceeded", and a normal run queued behind them then finishes.
func TestDeadlinesFreeRunSlots(t *testing.T) {
	c := startCoord(t, coordOpts{maxRuns: 8, extra: []string{"--run-timeout", "3s"}})
	c.startWorker("w1", 16)
	var stuck []string
	for range 8 {
		stuck = append(stuck, c.submit(map[string]any{"task": "Wait:\n- a", "agent": simAgent(600_000)}))
	}
	for _, id := range stuck {
		c.waitStatus(id, event.Running)
	}
	normal := c.submit(map[string]any{"task": "Plan:\n- one\n- two", "agent": simAgent(0)})
	for _, id := range stuck {
		r := c.waitFinal(id)
		if r.Status != event.Failed || r.Error != "deadline exceeded" {
			t.Fatalf("stuck run %s: %s %q", id, r.Status, r.Error)
		}
	}
	if r := c.waitFinal(normal); r.Status != event.Succeeded {
		t.Fatalf("normal run: %s %q", r.Status, r.Error)
	}
	// A submission's own timeout, within --max-run-timeout, wins.
	quick := c.submit(map[string]any{"task": "Wait:\n- a", "agent": simAgent(600_000), "timeout": "500ms"})
	start := time.Now()
	if r := c.waitFinal(quick); r.Status != event.Failed || r.Error != "deadline exceeded" {
		t.Fatalf("run with timeout: %s %q", r.Status, r.Error)
	}
	t.Logf("a 500ms deadline ended its run in %v", time.Since(start).Round(time.Millisecond))
}

// TestBudgetUseLiveAndFinal follows a submitted run's record: while it
// runs, the record shows its budget use (spawns here), and its final record
// shows the tokens used against the limit, the same as its usage.
func TestBudgetUseLiveAndFinal(t *testing.T) {
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 8)
	id := c.submit(map[string]any{"task": "Three:\n- a\n- b\n- c", "agent": simAgent(4000),
		"budget": map[string]any{"tokens": 1_000_000, "spawns": 10}})
	var live record.Run
	proc.WaitUntil(t, runTimeout, "the running record shows three spawns", func() bool {
		live = record.Run{}
		return c.getJSON("/v1/runs/"+id, &live) == http.StatusOK && live.Status == event.Running &&
			live.Budget[limits.KindSpawns] == limits.Amount{Used: 3, Limit: 10}
	})
	if a := live.Budget[limits.KindTokens]; a.Limit != 1_000_000 {
		t.Fatalf("live budget %+v", live.Budget)
	}
	r := c.waitFinal(id)
	tokens := r.Usage.InputTokens + r.Usage.OutputTokens
	if r.Status != event.Succeeded || r.Budget[limits.KindTokens] != (limits.Amount{Used: tokens, Limit: 1_000_000}) {
		t.Fatalf("final: %s, budget %+v, usage %+v", r.Status, r.Budget, r.Usage)
	}
	g := c.cli("get", id)
	if g.code != 0 || !strings.Contains(g.stdout, fmt.Sprintf("tokens %d/1000000", tokens)) {
		t.Fatalf("formica get: %d\n%s", g.code, g.stdout)
	}
}
