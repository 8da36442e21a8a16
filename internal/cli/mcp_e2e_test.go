package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/mcp/mcptest"
)

// TestRunMCPConfig: `formica run --mcp-config FILE` gives the embedded
// run's worker the file's servers: the root, whose spec names
// server-everything (run over stdio in the sandbox), calls its echo tool
// and answers with the result. A bad file stops the run before it starts.
func TestRunMCPConfig(t *testing.T) {
	srv := mcptest.Find(t)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		msg := map[string]any{"role": "assistant", "content": strings.Join(req.results(), "\n")}
		finish := "stop"
		if req.assistantTurns() == 0 {
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_0", "type": "function",
				"function": map[string]any{"name": "mcp__everything__echo", "arguments": `{"message":"via --mcp-config"}`}}}}
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   map[string]any{"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
		})
	}))
	t.Cleanup(model.Close)
	dir := t.TempDir()
	cfg, spec := filepath.Join(dir, "mcp.json"), filepath.Join(dir, "agent.yaml")
	os.WriteFile(cfg, mcptest.Config(map[string]any{"everything": srv.EverythingStdio("cli")}), 0o600)
	os.WriteFile(spec, []byte("name: root\nharness:\n  mcp: [everything]\n"), 0o600)

	r := formica(t, openAIEnv(model), "run", "--model", "openai:test-model", "--json", "--cwd", t.TempDir(),
		"--mcp-config", cfg, "--agent", spec, "go")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if rec := decodeRecord(t, r); rec.Status != "succeeded" || !strings.Contains(rec.Output, "Echo: via --mcp-config") {
		t.Fatalf("status %s output %q error %q", rec.Status, rec.Output, rec.Error)
	}

	os.WriteFile(cfg, []byte(`{"mcpServers": {"everything": {}}}`), 0o600)
	r = formica(t, openAIEnv(model), "run", "--model", "openai:test-model", "--mcp-config", cfg, "--agent", spec, "go")
	if r.code == 0 || !strings.Contains(r.stderr, `server "everything": needs command (stdio) or url (streamable HTTP)`) {
		t.Fatalf("bad --mcp-config: exit %d\n%s", r.code, r.stderr)
	}
}
