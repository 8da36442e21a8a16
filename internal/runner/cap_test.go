package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// TestToolCallCap: of a model response with more tool calls than
// MaxToolCalls, only the first MaxToolCalls run, in parallel and one by
// one: each call past the cap is answered with OverCapText (journaled as a
// tool error) and runs nothing: an agent call past it spawns no helper and
// takes no slot, any other call never reaches its tool. The model sees a
// result for every call, in call order, and the thread goes on.
func TestToolCallCap(t *testing.T) {
	const maxCalls = 3
	for _, parallel := range []bool{true, false} {
		t.Run(fmt.Sprint("parallel=", parallel), func(t *testing.T) {
			var counted atomic.Int32
			counter := &tools.Func{ToolName: "count", Desc: "counts", Parameters: json.RawMessage(`{"type":"object"}`),
				Fn: func(context.Context, json.RawMessage) (string, error) { counted.Add(1); return "counted", nil }}
			response := calls(spawnCall("h1", "one", "task-1"), call("c1", "count", map[string]int{}),
				spawnCall("h2", "two", "task-2"), spawnCall("h3", "three", "task-3"),
				call("c2", "count", map[string]int{}), spawnCall("h4", "four", "task-4"))
			root := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
				if !hasToolResults(req) {
					return response, nil
				}
				return text(joinResults(req)), nil
			}}
			helper := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
				return text("done " + task(req)), nil
			}}
			ev := &collector{}
			j := &memJournal{}
			r, err := newInProcess(Config{Models: models{"fake:root": root, "fake:helper": helper}, DefaultModel: "fake:root",
				Tools: []tools.Tool{counter}, Events: ev, Journal: j, MaxToolCalls: maxCalls})
			if err != nil {
				t.Fatal(err)
			}
			a := generalAgent()
			a.Tools = append(a.Tools, "count")
			a.ParallelToolCalls = &parallel
			a.Helper = spec.Helper{Model: "fake:helper"}
			res := run(t, r, RunRequest{ID: "run", Task: "go", Agent: a, Limits: limitsFor(16)})
			if res.Status != event.Succeeded {
				t.Fatalf("run: %s %q", res.Status, res.Error)
			}
			over := OverCapText(maxCalls)
			want := strings.Join([]string{"done task-1", "counted", "done task-2", over, over, over}, "|")
			if res.Output != want {
				t.Errorf("results seen by the model:\n%q\nwant\n%q", res.Output, want)
			}
			var tasks []string
			for _, req := range helper.requests() {
				tasks = append(tasks, task(req))
			}
			if len(tasks) != 2 || counted.Load() != 1 {
				t.Errorf("helpers asked %v, count ran %d times; want the first two helpers and one count", tasks, counted.Load())
			}
			if n := len(ev.of(event.ThreadSpawned)) + len(ev.of(event.ThreadRefused)); n != 2 || res.Stats.Admitted != 2 {
				t.Errorf("%d helpers spawned or refused, %d admitted; want 2 and 2", n, res.Stats.Admitted)
			}
			var got []string
			for _, e := range j.of(res.RootID) {
				if e.Kind == journal.KindTool && e.Result == over {
					got = append(got, e.CallID+":"+e.ToolStatus)
				}
			}
			slices.Sort(got) // in parallel, in the order they ended
			if diff := cmp.Diff([]string{"c2:" + journal.ToolError, "h3:" + journal.ToolError, "h4:" + journal.ToolError}, got); diff != "" {
				t.Errorf("journaled calls past the cap (-want +got):\n%s", diff)
			}
		})
	}
}
