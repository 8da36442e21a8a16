package record

import (
	"testing"

	"github.com/formica-run/formica/internal/event"
)

// TestInDoubtCounted: a thread counts the calls found in doubt in earlier
// executions of the run and the tool.results in doubt of this one; the
// totals sum them over the tree.
func TestInDoubtCounted(t *testing.T) {
	r := NewRecorder(nil)
	r.InDoubtBefore("helper", 2)
	ev := func(typ event.Type, thread, parent string, inDoubt bool) {
		r.Emit(event.Event{Type: typ, RunID: "run", ThreadID: thread, ParentID: parent, Tool: "bash", InDoubt: inDoubt})
	}
	ev(event.RunStarted, "root", "", false)
	ev(event.ThreadStarted, "root", "", false)
	ev(event.ToolResult, "root", "", true)
	ev(event.ToolResult, "root", "", false)
	ev(event.ThreadSpawned, "helper", "root", false)
	ev(event.ToolResult, "helper", "root", true)
	rec := r.Snapshot()
	got := map[string]int{}
	for _, th := range rec.Threads {
		got[th.ID] = th.InDoubt
	}
	if got["root"] != 1 || got["helper"] != 3 {
		t.Errorf("in doubt by thread %v, want root 1, helper 3", got)
	}
	if n := rec.Sum().InDoubt; n != 4 {
		t.Errorf("totals count %d in doubt, want 4", n)
	}
}
