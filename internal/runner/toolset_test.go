package runner

import (
	"testing"

	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
)

// TestThreadsShareTheirToolset: threads whose agents see the same tools in
// the same directory share one toolset (tools, schemas and all), so a wide
// fan-out holds one; a different directory, tool list or harness offer gets
// its own, and agents with handoffs get their own every time.
func TestThreadsShareTheirToolset(t *testing.T) {
	r := newRunner(t, setup{models: models{}})
	dir, other := t.TempDir(), t.TempDir()
	helper := spec.Agent{Name: "h", Tools: []string{tools.AgentToolName}}
	get := func(cwd string, a spec.Agent) *toolset {
		t.Helper()
		ts, err := r.toolsFor(t.Context(), &thread.Thread{Cwd: cwd, Agents: map[string]spec.Agent{"next": {Name: "next"}}}, &a)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	first := get(dir, helper)
	if len(first.schemas) != len(first.visible) || first.byName[tools.AgentToolName] == nil {
		t.Fatalf("toolset: %d schemas for %d tools, agent tool %v", len(first.schemas), len(first.visible), first.byName[tools.AgentToolName])
	}
	if get(dir, helper) != first {
		t.Error("two helpers of one spec in one directory do not share their toolset")
	}
	noShims := helper
	noShims.Harness.Tools = []string{}
	for name, ts := range map[string]*toolset{
		"another directory":      get(other, helper),
		"other direct tools":     get(dir, spec.Agent{Name: "h"}),
		"no harness tools":       get(dir, noShims),
		"handoffs (first time)":  get(dir, spec.Agent{Name: "h", Handoffs: []string{"next"}}),
		"handoffs (second time)": get(dir, spec.Agent{Name: "h", Handoffs: []string{"next"}}),
	} {
		if ts == first {
			t.Errorf("%s: shares the helper's toolset", name)
		}
	}
	if ts := get(dir, noShims); len(ts.visible) != 1 {
		t.Errorf("an agent offered no harness tools sees %v", tools.Names(ts.visible))
	}
	a, b := get(dir, spec.Agent{Name: "h", Handoffs: []string{"next"}}), get(dir, spec.Agent{Name: "h", Handoffs: []string{"next"}})
	if a == b || a.handoffs[HandoffToolName("next")] != "next" {
		t.Errorf("agents with handoffs share a toolset, or lack the handoff: %v", a.handoffs)
	}
}
