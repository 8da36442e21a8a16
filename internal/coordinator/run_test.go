package coordinator

import (
	"strconv"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

func testRun(t testing.TB) *run {
	t.Helper()
	ledger, err := limits.New(limits.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return newRun("r1", ledger, limits.NewTree(limits.Budget{}, time.Now), "")
}

// BenchmarkAdmitHelper is the admission stage of a spawn, past its
// decoding: the helper derived from the parent held here (id, spec, cwd,
// permissions), its slot admitted, its budget node and record registered
// in the run, then its slot released. An op is one helper.
func BenchmarkAdmitHelper(b *testing.B) {
	rn := testRun(b)
	agent := spec.Agent{Name: "root", Model: "sim", Tools: []string{"read_file", "list_dir"},
		Helper: spec.Helper{Tools: spec.ToolPolicy{Policy: "inherit"}}}
	parent := rn.add(&threadRec{thread: thread.Thread{RunID: "r1", ID: "p", Path: "root", Name: "root", Agent: agent, Cwd: "/tmp"}}, nil, rn.budget.Root())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		callKey := journal.CallKey(1, "call_"+strconv.Itoa(i))
		t := &threadRec{}
		th := &t.thread
		if err := thread.SetHelper(th, &parent.thread, nil, journal.HelperID("r1", "p", callKey, nil), "helper", "answer"); err != nil {
			b.Fatal(err)
		}
		slot, err := rn.ledger.Admit(th.Depth)
		if err != nil {
			b.Fatal(err)
		}
		node := parent.lease.Node()
		if err := node.Spawn(); err != nil {
			b.Fatal(err)
		}
		rn.add(t, parent, node.Child(th.Agent.Helper.Budget))
		slot.Release()
	}
}
