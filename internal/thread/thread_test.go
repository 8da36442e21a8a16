package thread

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/spec"
)

// TestHelperKeepsEveryAtMostOnce: a helper spawned after its parent handed
// off to an agent with other at-most-once tools (or none) keeps the
// parent's and the target's, with its template's besides, and asks about
// calls in doubt if any of them did: a handoff adds, never removes.
func TestHelperKeepsEveryAtMostOnce(t *testing.T) {
	parent := Thread{RunID: "r", ID: "p", Path: "lead", Name: "lead",
		Agent: spec.Agent{Name: "lead", Harness: spec.Harness{AtMostOnce: []string{"bash"}, InDoubt: spec.InDoubtAsk}},
		Agents: map[string]spec.Agent{
			"payer": {Name: "payer", Harness: spec.Harness{AtMostOnce: []string{"mcp__pay__*"}},
				Helper: spec.Helper{AtMostOnce: []string{"write_file"}}},
			"reader": {Name: "reader"},
		}}
	for _, tc := range []struct {
		handoffs []string
		want     []string
	}{
		{nil, []string{"bash"}},
		{[]string{"reader"}, []string{"bash"}},
		{[]string{"payer"}, []string{"mcp__pay__*", "write_file", "bash"}},
		{[]string{"payer", "reader"}, []string{"bash", "mcp__pay__*"}},
	} {
		var th Thread
		if err := SetHelper(&th, &parent, tc.handoffs, "h", "kid", "task"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, th.Agent.Harness.AtMostOnce); diff != "" {
			t.Errorf("after handoffs %v, at_most_once (-want +got):\n%s", tc.handoffs, diff)
		}
		if !th.Agent.Harness.AsksInDoubt() {
			t.Errorf("after handoffs %v, the helper does not ask about calls in doubt; its parent does", tc.handoffs)
		}
	}
}
