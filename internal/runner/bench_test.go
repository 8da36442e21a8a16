package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/sim"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// BenchmarkInProcessSpawn is the agent loop's own cost per helper: a root
// that spawns b.N helpers one by one, in this process, on the sim model.
func BenchmarkInProcessSpawn(b *testing.B) {
	// The root asks for its b.N helpers in one response.
	r, err := newInProcess(Config{Models: ModelOpenerFunc(func(string) (model.Model, error) { return sim.New(), nil }),
		MaxToolCalls: b.N})
	if err != nil {
		b.Fatal(err)
	}
	var task strings.Builder
	for i := range b.N {
		fmt.Fprintf(&task, "- part %d\n", i)
	}
	sequential := false
	root := spec.Agent{Name: "bench", Model: "sim", Tools: []string{tools.AgentToolName}, ParallelToolCalls: &sequential}
	b.ReportAllocs()
	b.ResetTimer()
	res, err := r.Run(context.Background(), RunRequest{Task: task.String(), Agent: root, Cwd: b.TempDir(),
		Limits: limitsFor(b.N)})
	if err != nil || res.Status != event.Succeeded {
		b.Fatalf("%v %s", err, res.Error)
	}
}

// BenchmarkTurn is one model turn with one tool call, the loop's unit of work.
func BenchmarkTurn(b *testing.B) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if len(req.Messages) < 2*b.N+2 {
			return calls(call("c", "list_dir", map[string]string{"path": "."})), nil
		}
		return text("done"), nil
	}}
	r, _ := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root"})
	a := spec.Agent{Name: "root", MaxTurns: b.N + 2}
	b.ReportAllocs()
	b.ResetTimer()
	res, err := r.Run(context.Background(), RunRequest{Task: "t", Agent: a, Cwd: b.TempDir()})
	if err != nil || res.Status != event.Succeeded {
		b.Fatalf("%v %s", err, res.Error)
	}
}

// BenchmarkTurnNoopTool is one model turn with one call to a tool that does
// nothing: the loop's own cost per turn (permission gate, events, history),
// without BenchmarkTurn's directory listing.
func BenchmarkTurnNoopTool(b *testing.B) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if len(req.Messages) < 2*b.N+2 {
			return calls(call("c", "noop", map[string]string{})), nil
		}
		return text("done"), nil
	}}
	noop := &tools.Func{ToolName: "noop", Desc: "does nothing", Parameters: []byte(`{"type":"object"}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { return "ok", nil }}
	r, _ := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Tools: []tools.Tool{noop}})
	a := spec.Agent{Name: "root", MaxTurns: b.N + 2, Tools: []string{"noop"},
		Harness: spec.Harness{Tools: []string{}, Permissions: policy.Permission{Default: policy.Allow}}}
	b.ReportAllocs()
	b.ResetTimer()
	res, err := r.Run(context.Background(), RunRequest{Task: "t", Agent: a, Cwd: b.TempDir()})
	if err != nil || res.Status != event.Succeeded {
		b.Fatalf("%v %s", err, res.Error)
	}
}
