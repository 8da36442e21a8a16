package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

// An agent spec travels in placements and journals, and its encoding is
// hashed (wire.EncodeSetup): it reads back as it was written, with an empty
// base tool list (none) kept apart from nil (all).
func TestAgentRoundTrip(t *testing.T) {
	par := false
	full := Agent{Name: "a", Instructions: "i", Model: "sim", ModelArgs: model.Args{"top_p": 0.9}, Tools: []string{"agent", "bash"},
		ParallelToolCalls: &par, MaxTurns: 4, OutputSchema: []byte(`{"type":"object"}`), Handoffs: []string{"b"},
		Harness: Harness{Cwd: "w", Tools: []string{"read"}, Permissions: policy.Permission{Default: policy.Ask,
			Rules: []policy.Rule{{Tool: "bash", Match: "ls *", Decision: policy.Allow}}},
			Sandbox: Sandbox{Network: true, CPU: "1", Memory: "1G", Processes: 8, FileSize: "1M", Timeout: "1m"}, MCP: []string{"m"}},
		Helper: Helper{Instructions: "h", Model: "sim", ModelArgs: model.Args{"stop": "END"}, OutputSchema: []byte(`{}`),
			Tools: ToolPolicy{Policy: policy.Restrict, Only: []string{"bash"}, Add: []string{"read"}}, Budget: limits.Budget{Tokens: 100, Spawns: 2}},
		Budget: limits.Budget{InputTokens: 5, OutputTokens: 6, Duration: 7},
	}
	for _, a := range []Agent{{}, {Name: "none", Harness: Harness{Tools: []string{}}}, full, HelperSpec(full, "h")} {
		data, err := msgpack.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var got Agent
		if err := msgpack.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(a, got); d != "" {
			t.Errorf("%s (-written +read):\n%s", a.Name, d)
		}
	}
}
