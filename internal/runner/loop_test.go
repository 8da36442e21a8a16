package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

func TestHelperSeesOnlyItsTaskAndInstructions(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if task(req) == "sub" {
			return text("sub done"), nil
		}
		if !hasToolResults(req) {
			return calls(spawnCall("c1", "helper", "sub")), nil
		}
		return text(joinResults(req)), nil
	}}
	r := newRunner(t, setup{models: models{"fake:root": m}})
	root := generalAgent()
	root.Helper.Instructions = "HELPER PROMPT"
	res := run(t, r, RunRequest{Task: "root task with SECRET-HISTORY", Agent: root})
	if res.Output != "sub done" {
		t.Fatalf("output %q", res.Output)
	}
	var helperReq *model.Request
	for _, q := range m.requests() {
		if task(q) == "sub" {
			helperReq = &q
		}
	}
	if helperReq == nil {
		t.Fatal("helper never called its model")
	}
	want := []model.Message{{Role: model.RoleSystem, Content: "HELPER PROMPT"}, {Role: model.RoleUser, Content: "sub"}}
	if d := cmp.Diff(want, helperReq.Messages); d != "" {
		t.Fatalf("helper messages (-want +got)\n%s", d)
	}
}

func TestModelInheritance(t *testing.T) {
	leaf := func(_ context.Context, req model.Request) (model.Response, error) { return text("leaf"), nil }
	parentFn := func(_ context.Context, req model.Request) (model.Response, error) {
		if task(req) == "sub" {
			return text("leaf"), nil
		}
		if !hasToolResults(req) {
			return calls(spawnCall("c1", "h", "sub")), nil
		}
		return text("done"), nil
	}
	tests := []struct {
		name         string
		helper       spec.Helper
		wantModel    string
		wantArgs     model.Args
		wantModelArg string
	}{
		{"inherit model and args, set ones override", spec.Helper{ModelArgs: model.Args{"max_tokens": 50}},
			"fake:root", model.Args{"temperature": 0.2, "max_tokens": 50}, "root"},
		{"own model, own args only", spec.Helper{Model: "fake:small", ModelArgs: model.Args{"top_p": 0.5}},
			"fake:small", model.Args{"top_p": 0.5}, "small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := models{"fake:root": {fn: parentFn}, "fake:small": {fn: leaf}}
			r := newRunner(t, setup{models: ms})
			root := generalAgent()
			root.Model = "fake:root"
			root.ModelArgs = model.Args{"temperature": 0.2, "max_tokens": 100}
			root.Helper = tt.helper
			run(t, r, RunRequest{Task: "root", Agent: root})
			var got *model.Request
			for _, q := range ms[tt.wantModel].requests() {
				if task(q) == "sub" {
					got = &q
				}
			}
			if got == nil {
				t.Fatalf("helper did not call %s", tt.wantModel)
			}
			if d := cmp.Diff(tt.wantArgs, got.Args); d != "" {
				t.Errorf("args (-want +got)\n%s", d)
			}
			if got.Model != tt.wantModelArg {
				t.Errorf("model name %q, want %q", got.Model, tt.wantModelArg)
			}
		})
	}
}

const countSchema = `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}},"additionalProperties":false}`

func TestOutputSchemaRetryThenFailure(t *testing.T) {
	tests := []struct {
		name       string
		answers    []string
		wantStatus event.Status
		wantOutput string
		wantErr    string
	}{
		{"valid first time", []string{`{"n": 3}`}, event.Succeeded, `{"n": 3}`, ""},
		{"fenced", []string{"```json\n{\"n\": 4}\n```"}, event.Succeeded, `{"n": 4}`, ""},
		{"corrected on retry", []string{"three", `{"n": 3}`}, event.Succeeded, `{"n": 3}`, ""},
		{"still invalid", []string{"three", `{"n": "3"}`, `{"n": 3}`}, event.Failed, "", "output did not match schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
				turn := 0
				for _, msg := range req.Messages {
					if msg.Role == model.RoleAssistant {
						turn++
					}
				}
				return text(tt.answers[turn]), nil
			}}
			r := newRunner(t, setup{models: models{"fake:root": m}})
			a := generalAgent()
			a.OutputSchema = json.RawMessage(countSchema)
			res := run(t, r, RunRequest{Task: "count", Agent: a})
			if res.Status != tt.wantStatus || res.Output != tt.wantOutput || !strings.Contains(res.Error, tt.wantErr) {
				t.Fatalf("got %s %q %q", res.Status, res.Output, res.Error)
			}
			reqs := m.requests()
			if !strings.Contains(reqs[0].Messages[0].Content, SchemaMarker) {
				t.Error("system prompt does not carry the schema")
			}
			if len(reqs) > 2 {
				t.Errorf("%d model calls, want at most 2 (one corrective retry)", len(reqs))
			}
		})
	}
}

func TestHelperOutputSchemaResultIsJSON(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		switch {
		case task(req) == "sub":
			return text(`{"n": 7}`), nil
		case task(req) == "bad":
			return text(`nope`), nil
		case !hasToolResults(req):
			return calls(spawnCall("c1", "good", "sub"), spawnCall("c2", "broken", "bad")), nil
		}
		return text(joinResults(req)), nil
	}}
	r := newRunner(t, setup{models: models{"fake:root": m}})
	a := generalAgent()
	a.Helper.OutputSchema = json.RawMessage(countSchema)
	res := run(t, r, RunRequest{Task: "root", Agent: a})
	parts := strings.SplitN(res.Output, "|", 2)
	if parts[0] != `{"n": 7}` || !strings.HasPrefix(parts[1], "Helper broken failed: output did not match schema") {
		t.Fatalf("output %q", res.Output)
	}
}

// probe records how its calls overlap. In parallel mode each call waits for
// the next one to finish, so calls complete in reverse order and results in
// call order prove the loop reorders them back.
type probe struct {
	parallel bool
	done     [4]chan struct{}
	all      chan struct{} // closed when all three calls have started

	mu      sync.Mutex
	active  int
	maxAct  int
	started []int
}

func (p *probe) tool() tools.Tool {
	return &tools.Func{ToolName: "probe", Desc: "probe", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct{ I int }
			json.Unmarshal(args, &a)
			p.mu.Lock()
			p.active++
			p.maxAct = max(p.maxAct, p.active)
			p.started = append(p.started, a.I)
			if len(p.started) == 3 {
				close(p.all)
			}
			p.mu.Unlock()
			if p.parallel {
				wait := []chan struct{}{p.all}
				if a.I < 3 {
					wait = append(wait, p.done[a.I+1])
				}
				for _, ch := range wait {
					select {
					case <-ch:
					case <-time.After(5 * time.Second):
						return "", fmt.Errorf("call %d: the other calls did not run alongside", a.I)
					}
				}
			}
			p.mu.Lock()
			p.active--
			p.mu.Unlock()
			close(p.done[a.I])
			return fmt.Sprint("r", a.I), nil
		}}
}

func TestParallelAndSequentialToolCallsKeepCallOrder(t *testing.T) {
	for _, parallel := range []bool{true, false} {
		t.Run(fmt.Sprint("parallel=", parallel), func(t *testing.T) {
			p := &probe{parallel: parallel, all: make(chan struct{})}
			for i := range p.done {
				p.done[i] = make(chan struct{})
			}
			m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
				if !hasToolResults(req) {
					return calls(call("a", "probe", map[string]int{"i": 1}), call("b", "probe", map[string]int{"i": 2}), call("c", "probe", map[string]int{"i": 3})), nil
				}
				return text(joinResults(req)), nil
			}}
			r, err := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Tools: []tools.Tool{p.tool()}})
			if err != nil {
				t.Fatal(err)
			}
			a := spec.Agent{Name: "root", Tools: []string{"probe"}, ParallelToolCalls: &parallel}
			res := run(t, r, RunRequest{Task: "go", Agent: a})
			if res.Output != "r1|r2|r3" {
				t.Fatalf("results %q (%s), want call order", res.Output, res.Error)
			}
			if parallel && p.maxAct != 3 {
				t.Fatalf("max concurrent %d, want 3", p.maxAct)
			}
			if !parallel && (p.maxAct != 1 || fmt.Sprint(p.started) != "[1 2 3]") {
				t.Fatalf("sequential: max concurrent %d, order %v", p.maxAct, p.started)
			}
			if m.requests()[0].ParallelToolCalls != parallel {
				t.Error("ParallelToolCalls not passed to the model")
			}
		})
	}
}

func TestHandoffKeepsThreadAndDepth(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		switch req.Messages[0].Content {
		case "TRIAGE":
			return calls(call("h1", "transfer_to_billing", map[string]any{})), nil
		case "BILLING":
			// Billing sees the whole conversation so far.
			if len(req.Messages) != 4 || req.Messages[3].Content != "Transferred to billing." {
				return text(fmt.Sprintf("lost history: %+v", req.Messages)), nil
			}
			return text("paid"), nil
		}
		return text("?"), nil
	}}
	ev := &collector{}
	r := newRunner(t, setup{models: models{"fake:root": m}, events: ev})
	triage := spec.Agent{Name: "triage", Instructions: "TRIAGE", Handoffs: []string{"billing"}}
	billing := spec.Agent{Name: "billing", Instructions: "BILLING"}
	res := run(t, r, RunRequest{Task: "refund me", Agent: triage, Agents: map[string]spec.Agent{"triage": triage, "billing": billing}})
	if res.Output != "paid" {
		t.Fatalf("output %q (%s)", res.Output, res.Error)
	}
	started := ev.of(event.ThreadStarted)
	handoffs := ev.of(event.ThreadHandoff)
	if len(started) != 1 || len(handoffs) != 1 {
		t.Fatalf("%d threads started, %d handoffs; want 1 and 1", len(started), len(handoffs))
	}
	if handoffs[0].ThreadID != started[0].ThreadID || handoffs[0].Depth != 0 || len(ev.of(event.ThreadSpawned)) != 0 {
		t.Fatalf("handoff %+v moved thread or depth (start %+v)", handoffs[0], started[0])
	}
	// transfer_to_billing was offered as a tool.
	offered := false
	for _, s := range m.requests()[0].Tools {
		offered = offered || s.Name == "transfer_to_billing"
	}
	if !offered {
		t.Error("handoff tool not shown to the model")
	}
}

func TestAskReachesApproverFromInsideAHelper(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprint("allow=", allow), func(t *testing.T) {
			cwd := t.TempDir()
			args := `{"path":"out.txt","content":"hello"}`
			m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
				switch task(req) {
				case "root":
					if !hasToolResults(req) {
						return calls(spawnCall("c", "a", "mid")), nil
					}
				case "mid":
					if !hasToolResults(req) {
						return calls(spawnCall("c", "b", "leaf")), nil
					}
				case "leaf":
					if !hasToolResults(req) {
						return calls(model.ToolCall{ID: "w", Name: "write_file", Arguments: args}), nil
					}
				}
				return text(joinResults(req)), nil
			}}
			var got []policy.ApprovalRequest
			var mu sync.Mutex
			approver := policy.ApproverFunc(func(_ context.Context, req policy.ApprovalRequest) (policy.Approval, error) {
				mu.Lock()
				got = append(got, req)
				mu.Unlock()
				return policy.Approval{Allow: allow, Reason: map[bool]string{false: "nope"}[allow]}, nil
			})
			ev := &collector{}
			r := newRunner(t, setup{models: models{"fake:root": m}, approver: approver, events: ev})
			a := spec.Default().Agent // write_file asks by default
			a.Model = "fake:root"
			res := run(t, r, RunRequest{Task: "root", Agent: a, Cwd: cwd})
			if len(got) != 1 {
				t.Fatalf("%d approval requests, want 1 (the agent tool asks none)", len(got))
			}
			if got[0].ThreadPath != "root/a/b" || got[0].Tool != "write_file" || got[0].Arguments != args || got[0].RunID != res.RunID {
				t.Fatalf("request %+v", got[0])
			}
			_, statErr := os.Stat(filepath.Join(cwd, "out.txt"))
			if allow != (statErr == nil) {
				t.Fatalf("allow=%v but file exists=%v", allow, statErr == nil)
			}
			if !allow && res.Output != tools.NotApprovedText("write_file", "nope") {
				t.Fatalf("output %q", res.Output)
			}
			if len(ev.of(event.ApprovalRequested)) != 1 || len(ev.of(event.ApprovalResolved)) != 1 {
				t.Fatal("approval events missing")
			}
		})
	}
}

func TestDenyTextAndModelGoesOn(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(call("b", "bash", map[string]string{"command": "echo hi"})), nil
		}
		return text("after: " + joinResults(req)), nil
	}}
	r := newRunner(t, setup{models: models{"fake:root": m}})
	a := spec.Agent{Name: "root", Harness: spec.Harness{Permissions: policy.Permission{Rules: []policy.Rule{{Tool: "bash", Decision: policy.Deny}}}}}
	res := run(t, r, RunRequest{Task: "t", Agent: a})
	if res.Output != "after: Tool call denied by permission policy: bash" {
		t.Fatalf("output %q", res.Output)
	}
}

func TestEscapesDeniedEvenWhenRulesAllow(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP SECRET"), 0o600)
	cwd := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(cwd, "link")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(cwd, filepath.Join(outside, "secret.txt"))
	for _, path := range []string{rel, filepath.Join(outside, "secret.txt"), "link/secret.txt"} {
		t.Run(path, func(t *testing.T) {
			m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
				if !hasToolResults(req) {
					return calls(call("r", "read_file", map[string]string{"path": path})), nil
				}
				return text(joinResults(req)), nil
			}}
			r := newRunner(t, setup{models: models{"fake:root": m}})
			a := spec.Agent{Name: "root", Harness: spec.Harness{Permissions: policy.Permission{Default: policy.Allow, Rules: []policy.Rule{{Tool: "*", Decision: policy.Allow}}}}}
			res := run(t, r, RunRequest{Task: "t", Agent: a, Cwd: cwd})
			if strings.Contains(res.Output, "TOP SECRET") || !strings.HasPrefix(res.Output, "Error:") {
				t.Fatalf("escape via %q: %q", path, res.Output)
			}
		})
	}
}

func TestMaxTurnsFailsHelperWithReason(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if task(req) == "loop" {
			return calls(call("x", "list_dir", map[string]string{"path": "."})), nil
		}
		if !hasToolResults(req) {
			return calls(spawnCall("c", "looper", "loop")), nil
		}
		return text(joinResults(req)), nil
	}}
	r := newRunner(t, setup{models: models{"fake:root": m}})
	a := generalAgent()
	a.MaxTurns = 3
	res := run(t, r, RunRequest{Task: "root", Agent: a})
	if res.Output != "Helper looper failed: max turns reached (3)" {
		t.Fatalf("output %q", res.Output)
	}
}

func TestCancelReachesHelpers(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	m := &fakeModel{fn: func(ctx context.Context, req model.Request) (model.Response, error) {
		if task(req) == "root" && !hasToolResults(req) {
			return calls(spawnCall("c", "slow", "wait")), nil
		}
		if task(req) == "wait" {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return model.Response{}, ctx.Err()
		}
		return text(joinResults(req)), nil
	}}
	ev := &collector{}
	r := newRunner(t, setup{models: models{"fake:root": m}, events: ev})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-started; cancel(fmt.Errorf("user pressed ctrl-c")) }()
	res, err := r.Run(ctx, RunRequest{Task: "root", Agent: generalAgent(), Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != event.Cancelled || res.Error != "user pressed ctrl-c" {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
	for _, e := range ev.of(event.ThreadFinished) {
		if e.Status != event.Cancelled {
			t.Errorf("thread %s ended %s", e.Name, e.Status)
		}
	}
	if res.Stats.Live != 0 {
		t.Errorf("live %d after cancel", res.Stats.Live)
	}
}

func TestUsageSummedOverTree(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if task(req) == "root" && !hasToolResults(req) {
			return calls(spawnCall("a", "a", "x"), spawnCall("b", "b", "y")), nil
		}
		return text("ok"), nil
	}}
	r := newRunner(t, setup{models: models{"fake:root": m}})
	res := run(t, r, RunRequest{Task: "root", Agent: generalAgent()})
	// root: 2 calls, helpers: 1 each; every call is 10 in, 1 out.
	if want := (model.Usage{InputTokens: 40, OutputTokens: 4}); res.Usage != want {
		t.Fatalf("usage %+v, want %+v", res.Usage, want)
	}
}

func TestUnknownToolAndBadArgumentsAreResults(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(
				model.ToolCall{ID: "1", Name: "nope", Arguments: "{}"},
				model.ToolCall{ID: "2", Name: "agent", Arguments: "{not json"},
				model.ToolCall{ID: "3", Name: "agent", Arguments: `{"name":"bad name","task":"x"}`},
				model.ToolCall{ID: "4", Name: "agent", Arguments: `{"name":"ok","task":""}`},
			), nil
		}
		return text(joinResults(req)), nil
	}}
	ev := &collector{}
	r := newRunner(t, setup{models: models{"fake:root": m}, events: ev})
	res := run(t, r, RunRequest{Task: "root", Agent: generalAgent()})
	parts := strings.Split(res.Output, "|")
	if len(parts) != 4 || !strings.HasPrefix(parts[0], `Error: unknown tool "nope"`) {
		t.Fatalf("output %q", res.Output)
	}
	for _, p := range parts[1:] {
		if !strings.HasPrefix(p, "Error: bad arguments") {
			t.Errorf("result %q", p)
		}
	}
	if n := len(ev.of(event.ThreadSpawned)) + len(ev.of(event.ThreadRefused)); n != 0 || res.Stats.Admitted != 0 {
		t.Fatalf("bad calls spawned or used slots: %d events, %+v", n, res.Stats)
	}
}
