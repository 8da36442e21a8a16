package journal

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

// TestChildren: a thread's helpers are the children its spawns name and
// those its agent calls derive, each once, in the order named; other
// tools' calls name none.
func TestChildren(t *testing.T) {
	run, thread := "run", "parent"
	entries := []Entry{
		{Kind: KindStart, Task: "go"},
		{Kind: KindModel, Turn: 0, Message: &model.Message{ToolCalls: []model.ToolCall{
			{ID: "call_1", Name: AgentTool}, {ID: "call_2", Name: "bash"}, {ID: "call_3", Name: AgentTool}}}},
		{Kind: KindSpawn, Turn: 0, CallID: "call_1", Child: ThreadID(run, thread, CallKey(0, "call_1"))},
		{Kind: KindSpawn, Turn: 0, CallID: "legacy", Child: "random-id"},
		{Kind: KindModel, Turn: 1, Message: &model.Message{ToolCalls: []model.ToolCall{{ID: "call_1", Name: AgentTool}}}},
		{Kind: KindModel, Turn: 2},
	}
	want := []string{
		ThreadID(run, thread, CallKey(0, "call_1")),
		ThreadID(run, thread, CallKey(0, "call_3")),
		"random-id",
		ThreadID(run, thread, CallKey(1, "call_1")),
	}
	if diff := cmp.Diff(want, Children(run, thread, entries)); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
}
