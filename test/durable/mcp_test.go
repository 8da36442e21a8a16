package durable_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/mcp/mcptest"
	"github.com/formica-run/formica/test/proc"
)

// TestWorkerMCPConfig: `worker --mcp-config` with server-everything over
// stdio (sandboxed): the worker announces the server in its heartbeat
// (GET /v1/workers, `formica workers`), a run naming it is placed there
// of two workers, its MCP tool call's result is the run's output, and the
// worker's formica_tool_calls_total names the tool. A worker given a bad
// config refuses to start, saying why.
func TestWorkerMCPConfig(t *testing.T) {
	t.Parallel()
	srv := mcptest.Find(t)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, mcptest.Config(map[string]any{"everything": srv.EverythingStdio(uuid.NewString())}), 0o600); err != nil {
		t.Fatal(err)
	}
	model := openAIServer(t, func(r *chatRequest) chatAnswer {
		if r.turn() == 0 {
			return chatAnswer{calls: []toolCall{{"mcp__everything__echo", map[string]string{"message": "over NATS"}}}}
		}
		last, _ := r.Messages[len(r.Messages)-1].Content.(string)
		return chatAnswer{text: last}
	})
	env := []string{"OPENAI_BASE_URL=" + model.URL + "/v1", "OPENAI_API_KEY=test-key"}
	c := startCoord(t, coordOpts{})
	httpPort := proc.FreePorts(t, 1)[0]
	c.startWorkerWith("w1", 2, env, "--mcp-config", cfg, "--http", fmt.Sprintf("127.0.0.1:%d", httpPort))
	c.startWorkerWith("w2", 2, env)

	var ws []struct {
		ID  string
		MCP []string `json:"mcp"`
	}
	c.getJSON("/v1/workers", &ws)
	for _, w := range ws {
		if has := slices.Contains(w.MCP, "everything"); has != (w.ID == "w1") {
			t.Errorf("GET /v1/workers: %s has MCP servers %v", w.ID, w.MCP)
		}
	}
	r := c.cli("workers")
	if r.code != 0 || !strings.Contains(r.stdout, "MCP") {
		t.Fatalf("formica workers: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 6 && f[0] == "w1" && f[6] != "everything" {
			t.Errorf("formica workers row %q: want everything in the MCP column", l)
		}
	}

	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort)
	before := scrapeMetrics(t, metricsURL, "")
	for range 2 {
		run := c.submit(map[string]any{"task": "root", "model": "openai:gpt-test",
			"agent": map[string]any{"name": "root", "harness": map[string]any{"mcp": []string{"everything"}}}})
		rec := c.waitFinal(run)
		if rec.Status != event.Succeeded || !strings.Contains(rec.Output, "Echo: over NATS") {
			t.Fatalf("run %s: %s (%s), output %q", run, rec.Status, rec.Error, rec.Output)
		}
		if rec.Threads[0].Worker != "w1" {
			t.Errorf("run %s placed on %s, not on w1 which has the server", run, rec.Threads[0].Worker)
		}
	}
	checkMoved(t, "worker w1", before, scrapeMetrics(t, metricsURL, ""), []moved{
		{"formica_tool_calls_total", []string{"tool", "mcp__everything__echo", "outcome", "ok"}, 2},
	})

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"mcpServers": {"x": {"command": "node", "url": "http://127.0.0.1:1/"}}}`), 0o600)
	p := proc.Start(t, "worker with a bad --mcp-config", bin.worker, "--nats", c.url, "--nats-creds", c.creds("worker", "w3"), "--mcp-config", bad)
	if code := p.Wait(t, readyTimeout); code == 0 || !strings.Contains(p.Stderr.String(), `server "x": has both command (stdio) and url (HTTP)`) {
		t.Errorf("worker --mcp-config %s: exit %d\n%s", bad, code, p.Stderr.String())
	}
}
