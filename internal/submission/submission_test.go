package submission

import (
	"errors"
	"github.com/formica-run/formica/internal/model/providers"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/wire"
)

func TestCheck(t *testing.T) {
	env := func(vars ...string) Options {
		eps, err := providers.Parse([]byte("endpoints: {}\n"), func(k string) string {
			for _, v := range vars {
				if name, val, _ := strings.Cut(v, "="); name == k {
					return val
				}
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		return Options{Models: &providers.Opener{Endpoints: eps}}
	}
	ok := func() wire.RunSubmit {
		return wire.RunSubmit{RunID: "r-1", Task: "t", Agent: spec.Agent{Name: "a", Model: "sim", Tools: []string{"agent"}}}
	}
	for _, tc := range []struct {
		name string
		edit func(*wire.RunSubmit)
		opt  Options
		want string // "" means valid
	}{
		{"valid", func(*wire.RunSubmit) {}, Options{}, ""},
		{"no run id yet", func(s *wire.RunSubmit) { s.RunID = "" }, Options{}, ""},
		{"bad run id", func(s *wire.RunSubmit) { s.RunID = "a=b" }, Options{}, `run invalid id "a=b"`},
		{"empty task", func(s *wire.RunSubmit) { s.Task = " \n" }, Options{}, "the task is empty"},
		{"negative depth", func(s *wire.RunSubmit) { s.Limits = limits.Config{MaxDepth: -1} }, Options{}, "agent_max_depth must not be negative"},
		{"negative threads", func(s *wire.RunSubmit) { s.Limits = limits.Config{MaxThreads: -1} }, Options{}, "agent_max_threads must not be negative"},
		{"past a ceiling", func(s *wire.RunSubmit) { s.Limits = limits.Config{MaxThreads: 300} }, Options{},
			"agent_max_threads 300 is above the ceiling of 256 (coordinator --max-agent-threads)"},
		{"raised ceiling", func(s *wire.RunSubmit) { s.Limits = limits.Config{MaxThreads: 300} }, Options{Ceilings: limits.Ceilings{MaxThreads: 300}}, ""},
		{"task past its ceiling", func(s *wire.RunSubmit) { s.Task = "tasks" }, Options{Ceilings: limits.Ceilings{MaxTaskBytes: 4}},
			"task 5 bytes is above the ceiling of 4 bytes (coordinator --max-task-bytes)"},
		{"negative budget", func(s *wire.RunSubmit) { s.Budget = limits.Budget{Tokens: -1} }, Options{}, "budget amounts must not be negative"},
		{"unknown provider", func(s *wire.RunSubmit) { s.Agent.Model = "gemini:pro" }, Options{}, `model: unknown model provider "gemini" in "gemini:pro"`},
		{"no provider", func(s *wire.RunSubmit) { s.Agent.Model = "gpt-4o" }, Options{}, "e.g. openai:gpt-4o"},
		{"no model name", func(s *wire.RunSubmit) { s.Agent.Model = "anthropic:" }, Options{}, "names no model"},
		{"helper model", func(s *wire.RunSubmit) { s.Agent.Helper.Model = "gemini:x" }, Options{}, "helper.model: unknown model provider"},
		{"handoff agent model", func(s *wire.RunSubmit) {
			s.Agents = map[string]spec.Agent{"w": {Name: "w", Model: "nope:x"}}
		}, Options{}, "agents.w.model: unknown model provider"},
		{"unknown tool", func(s *wire.RunSubmit) { s.Agent.Tools = []string{"teleport"} }, Options{}, `tools: unknown tool "teleport"`},
		{"agent is not a harness tool", func(s *wire.RunSubmit) { s.Agent.Harness.Tools = []string{"agent"} }, Options{}, `harness.tools: unknown tool "agent"`},
		{"MCP tool of a named server", func(s *wire.RunSubmit) {
			s.Agent.Harness.MCP = []string{"github"}
			s.Agent.Tools = []string{"agent", "mcp__github__create_issue"}
			s.Agent.Harness.Tools = []string{"read_file", "mcp__github__*"}
		}, Options{}, ""},
		{"MCP tool of a server not named", func(s *wire.RunSubmit) { s.Agent.Tools = []string{"mcp__jira__search"} }, Options{},
			`tools: unknown tool "mcp__jira__search" (MCP server "jira" is not in harness.mcp)`},
		{"harness glob", func(s *wire.RunSubmit) { s.Agent.Harness.Tools = []string{"*_file"} }, Options{}, ""},
		{"bad harness glob", func(s *wire.RunSubmit) { s.Agent.Harness.Tools = []string{"read_[file"} }, Options{}, `harness.tools: "read_[file" is not a valid glob`},
		{"no glob among direct tools", func(s *wire.RunSubmit) { s.Agent.Tools = []string{"*_file"} }, Options{}, `tools: unknown tool "*_file"`},
		{"base tool", func(s *wire.RunSubmit) { s.Agent.Tools = []string{"agent", "bash"} }, Options{}, ""},
		{"missing key known", func(s *wire.RunSubmit) { s.Agent.Model = "openai:gpt-4o" }, env(), "needs OPENAI_API_KEY"},
		{"missing key unknown", func(s *wire.RunSubmit) { s.Agent.Model = "openai:gpt-4o" }, Options{}, ""},
		{"local server", func(s *wire.RunSubmit) { s.Agent.Model = "openai:llama" }, env("OPENAI_BASE_URL=http://x/v1"), ""},
		{"anthropic key", func(s *wire.RunSubmit) { s.Agent.Model = "anthropic:claude" }, env("OPENAI_API_KEY=k"), "needs ANTHROPIC_API_KEY"},
		{"unknown endpoint", func(s *wire.RunSubmit) { s.Agent.Helper.Model = "slow/m" }, Options{Models: &providers.Opener{}},
			`helper.model: unknown model endpoint "slow" in "slow/m"`},
		{"declared endpoint", func(s *wire.RunSubmit) { s.Agent.Model = "fast/m" }, Options{Models: &providers.Opener{Endpoints: fastEndpoint(t)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := ok()
			tc.edit(&sub)
			err := Check(sub, tc.opt)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check: %v, want %q", err, tc.want)
			case err != nil && !errors.Is(err, ErrInvalid):
				t.Fatalf("Check: %v does not match ErrInvalid", err)
			}
			if tc.name == "bad run id" && !errors.Is(err, ids.ErrInvalid) {
				t.Fatalf("Check: %v does not match ids.ErrInvalid", err)
			}
		})
	}
}

// fastEndpoint declares one endpoint, fast, on a local server.
func fastEndpoint(t *testing.T) *providers.Endpoints {
	t.Helper()
	eps, err := providers.Parse([]byte("endpoints:\n  fast: {format: openai, base_url: 'http://127.0.0.1:1/v1'}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return eps
}
