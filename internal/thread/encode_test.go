package thread

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
)

// roundTrip is v encoded as msgpack and decoded again.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	data, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := msgpack.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A thread and a result cross the wire in every placement and spawn: each
// reads back as it was written, empty or full; an empty base tool list
// stays empty (no tools), apart from nil (all of them).
func TestEncodingRoundTrips(t *testing.T) {
	par := true
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	full := Thread{
		RunID: "r", ID: "t", ParentID: "p", Depth: 2, Path: "root/a/b", Name: "b", Task: "do it", Cwd: "/w",
		Agent: spec.Agent{Name: "b", Instructions: "i", Model: "sim", ModelArgs: model.Args{"temperature": 0.5},
			Tools: []string{"agent"}, ParallelToolCalls: &par, MaxTurns: 3, OutputSchema: []byte(`{"type":"object"}`),
			Handoffs: []string{"c"}, Harness: spec.Harness{Cwd: "sub", Tools: []string{},
				Permissions: policy.Permission{Default: policy.Ask, Rules: []policy.Rule{{Tool: "bash", Match: "git *", Decision: policy.Allow}}},
				Sandbox:     spec.Sandbox{Network: true, Processes: 9}, MCP: []string{"m"}},
			Helper: spec.Helper{Model: "sim", Tools: spec.ToolPolicy{Policy: policy.Restrict, Only: []string{"agent"}}}},
		Agents:      map[string]spec.Agent{"c": {Name: "c", Harness: spec.Harness{Tools: []string{"read"}}}},
		Permissions: policy.Permissions{{Default: policy.Deny}},
		Replay: []journal.Entry{{Kind: journal.KindModel, Time: at, Turn: 1, Usage: model.Usage{InputTokens: 3},
			Message: &model.Message{Role: model.RoleAssistant, Content: "hi"}}},
	}
	for _, th := range []Thread{{}, full} {
		if d := cmp.Diff(th, roundTrip(t, th)); d != "" {
			t.Errorf("thread (-written +read):\n%s", d)
		}
	}
	if got := roundTrip(t, full).Agent.Harness.Tools; got == nil {
		t.Error("an empty base tool list became nil (all tools)")
	}
	for _, r := range []Result{{}, {Status: event.Failed, Output: "o", Error: "e", Usage: model.Usage{InputTokens: 5, OutputTokens: 2}, Own: model.Usage{InputTokens: 1}}} {
		if d := cmp.Diff(r, roundTrip(t, r)); d != "" {
			t.Errorf("result (-written +read):\n%s", d)
		}
	}
}
