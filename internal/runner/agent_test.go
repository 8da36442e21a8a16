package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/thread"
)

// fakeSpawner answers every spawn with one result or error, counting them.
type fakeSpawner struct {
	calls  int
	result thread.Result
	err    error
}

func (f *fakeSpawner) Spawn(_ context.Context, _ *SpawnRequest, call SpawnCall) {
	f.calls++
	call.Ended(f.result, f.err)
}

// agentCallResult runs a root thread whose model makes one agent call with
// args, through sp, and returns the call's tool result.
func agentCallResult(t *testing.T, sp Spawner, args string) string {
	t.Helper()
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(model.ToolCall{ID: "c1", Name: "agent", Arguments: args}), nil
		}
		return text(joinResults(req)), nil
	}}
	r, err := New(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Spawner: sp})
	if err != nil {
		t.Fatal(err)
	}
	res := r.RunThread(context.Background(), &thread.Thread{RunID: "run", ID: "root", Path: "root", Name: "root",
		Task: "go", Agent: generalAgent(), Cwd: t.TempDir()})
	if res.Status != event.Succeeded {
		t.Fatalf("root ended %+v", res)
	}
	return res.Output
}

func TestAgentBadCallsSpawnNothing(t *testing.T) {
	for _, args := range []string{
		`{"name":"two words","task":"x"}`,
		`{"name":"","task":"x"}`,
		`{"name":"` + strings.Repeat("a", 65) + `","task":"x"}`,
		`{"name":"ok","task":"   "}`,
		`{"name":"ok"}`,
		`not json`,
		`{"name":"ok","task":"x","extra":1}`,
		`{"name":"ok","task":"x"} trailing`,
	} {
		sp := &fakeSpawner{}
		if out := agentCallResult(t, sp, args); !strings.HasPrefix(out, "Error: bad arguments") {
			t.Errorf("%s: got %q, want a bad-arguments error", args, out)
		}
		if sp.calls != 0 {
			t.Errorf("%s: spawned", args)
		}
	}
}

func TestAgentResults(t *testing.T) {
	ok := `{"name":"research.v2","task":"find it"}`
	tests := []struct {
		name string
		sp   *fakeSpawner
		want string
	}{
		{"answer", &fakeSpawner{result: thread.Result{Status: event.Succeeded, Output: "42"}}, "42"},
		{"depth", &fakeSpawner{err: &limits.Refusal{Reason: limits.ReasonDepth}}, limits.DepthMessage},
		{"threads", &fakeSpawner{err: &limits.Refusal{Reason: limits.ReasonThreads}}, limits.ThreadMessage},
		{"failed", &fakeSpawner{result: thread.Failed("max turns reached (3)")}, "Helper research.v2 failed: max turns reached (3)"},
		{"transport", &fakeSpawner{err: errors.New("worker lost")}, "Helper research.v2 failed: worker lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentCallResult(t, tt.sp, ok); got != tt.want || tt.sp.calls != 1 {
				t.Fatalf("got %q after %d spawns, want %q after one", got, tt.sp.calls, tt.want)
			}
		})
	}
}
