package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
)

var agentTool = model.ToolSchema{Name: "agent", Description: "spawn a helper", Parameters: json.RawMessage(`{"type":"object"}`)}

func user(s string) model.Message { return model.Message{Role: model.RoleUser, Content: s} }

func call(id, name, task string) model.ToolCall {
	return model.ToolCall{ID: id, Name: "agent", Arguments: marshal(map[string]string{"name": name, "task": task})}
}

func gen(t *testing.T, req model.Request) model.Response {
	t.Helper()
	resp, err := New().Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Usage.InputTokens < 1 || resp.Usage.OutputTokens < 1 {
		t.Errorf("usage %+v has a zero count", resp.Usage)
	}
	return resp
}

func TestSpawn(t *testing.T) {
	tests := []struct {
		name, task string
		want       []model.ToolCall
	}{
		{"fan-out", "Research these:\n- Alpha one\n- beta\n- Gamma, delta & co!\nThen summarise.", []model.ToolCall{
			call("call_1", "alpha-one", "Alpha one"),
			call("call_2", "beta", "beta"),
			call("call_3", "gamma-delta-co", "Gamma, delta & co!"),
		}},
		{"nested", "- a\n  - a1\n  - a2\n\n- b\n    detail of b\n      more", []model.ToolCall{
			call("call_1", "a", "a\n- a1\n- a2"),
			call("call_2", "b", "b\ndetail of b\n  more"),
		}},
		{"indented list", "Plan:\n   - x\n   - y\n     - y1", []model.ToolCall{
			call("call_1", "x", "x"),
			call("call_2", "y", "y\n- y1"),
		}},
		{"chain", "- outer\n  - inner\n    - innermost", []model.ToolCall{
			call("call_1", "outer", "outer\n- inner\n  - innermost"),
		}},
		{"slug fallbacks and duplicates", "- ???\n- Fix it\n- fix IT\n- été", []model.ToolCall{
			call("call_1", "part-1", "???"),
			call("call_2", "fix-it", "Fix it"),
			call("call_3", "fix-it-3", "fix IT"),
			call("call_4", "t", "été"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, parallel := range []bool{true, false} {
				resp := gen(t, model.Request{
					Messages:          []model.Message{{Role: model.RoleSystem, Content: "be useful\n- not a part"}, user(tt.task)},
					Tools:             []model.ToolSchema{agentTool},
					ParallelToolCalls: parallel,
				})
				if diff := cmp.Diff(model.Response{ToolCalls: tt.want, StopReason: "tool_calls"}, resp,
					cmpIgnoreUsage); diff != "" {
					t.Errorf("parallel=%v (-want +got):\n%s", parallel, diff)
				}
				for _, c := range resp.ToolCalls {
					var args struct{ Name, Task string }
					if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || !spec.ValidName(args.Name) || args.Task == "" {
						t.Errorf("bad call %+v (%v)", c, err)
					}
				}
			}
		})
	}
}

var cmpIgnoreUsage = cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Usage" }, cmp.Ignore())

func TestSlug(t *testing.T) {
	tests := map[string]string{
		"Write the tests":                         "write-the-tests",
		"  API  v2: rollout":                      "api-v2-rollout",
		"one two three four five six seven eight": "one-two-three-four-five-six",
		strings.Repeat("x", 40):                   strings.Repeat("x", 32),
		"first line\nsecond line":                 "first-line",
		"":                                        "part-7",
		"—":                                       "part-7",
	}
	for in, want := range tests {
		got := slug(in, 7)
		if got != want || !spec.ValidName(got) || len(got) > 32 {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLeaf(t *testing.T) {
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
		{"no list", model.Request{Messages: []model.Message{user("\n  Summarise the README \nthoroughly")}, Tools: []model.ToolSchema{agentTool}},
			"done: Summarise the README"},
		{"no agent tool", model.Request{Messages: []model.Message{user("- a\n- b")}}, "done: - a"},
		{"already answered", model.Request{Messages: []model.Message{user("- a\n- b"), {Role: model.RoleAssistant, Content: "hm"}},
			Tools: []model.ToolSchema{agentTool}}, "done: - a"},
		{"empty", model.Request{}, "done"},
		{"a correction is not split", model.Request{Messages: []model.Message{user("x"), {Role: model.RoleAssistant, Content: "oops"},
			user("Your answer did not validate:\n- at '/a': missing\n- at '/b': wrong")}, Tools: []model.ToolSchema{agentTool}},
			"done: Your answer did not validate:"},
		{"last user message counts", model.Request{Messages: []model.Message{user("- a\n- b"),
			{Role: model.RoleAssistant, Content: "x"}, user("try again")}, Tools: []model.ToolSchema{agentTool}}, "done: try again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(model.Response{Text: tt.want, StopReason: "stop"}, gen(t, tt.req), cmpIgnoreUsage); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	msgs := []model.Message{
		user("- a\n- b\n- c"),
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			call("call_1", "a", "a"), call("call_2", "b", "b"), call("call_3", "c", "c"),
			{ID: "call_4", Name: "read_file", Arguments: `{"path": "x"}`},
		}},
		{Role: model.RoleTool, ToolCallID: "call_3", Content: "Agent depth limit reached. Solve the task yourself."},
		{Role: model.RoleTool, ToolCallID: "call_1", Content: "x: done: x\ny: done: y"},
		{Role: model.RoleTool, ToolCallID: "call_2", Content: ""},
	}
	resp := gen(t, model.Request{Messages: msgs, Tools: []model.ToolSchema{agentTool}})
	want := "a: x: done: x\n  y: done: y\nb:\nc: Agent depth limit reached. Solve the task yourself.\nread_file: (no result)"
	if resp.Text != want || len(resp.ToolCalls) != 0 {
		t.Errorf("text\n%s\nwant\n%s", resp.Text, want)
	}
}

// run drives sim the way the runner does, spawning helpers recursively.
func run(t *testing.T, task string, depth int) string {
	t.Helper()
	msgs := []model.Message{{Role: model.RoleSystem, Content: "sys"}, user(task)}
	for turn := 0; turn < 3; turn++ {
		resp := gen(t, model.Request{Messages: msgs, Tools: []model.ToolSchema{agentTool}})
		if len(resp.ToolCalls) == 0 {
			return resp.Text
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls})
		for _, c := range resp.ToolCalls {
			var args struct{ Name, Task string }
			_ = json.Unmarshal([]byte(c.Arguments), &args)
			result := "Agent depth limit reached. Solve the task yourself."
			if depth < 2 {
				result = run(t, args.Task, depth+1)
			}
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: c.ID, Content: result})
		}
	}
	t.Fatal("no final answer")
	return ""
}

func TestTree(t *testing.T) {
	got := run(t, "Build it:\n- backend\n  - api\n  - db\n    - schema\n- frontend", 0)
	want := `backend: api: done: api
  db: schema: Agent depth limit reached. Solve the task yourself.
frontend: done: frontend`
	if got != want {
		t.Errorf("tree answer\n%s\nwant\n%s", got, want)
	}
}

func TestSchemaAnswer(t *testing.T) {
	schema := `{"type":"object","required":["summary","count","ok","tags","kind","score","nested","maybe","ref"],
	"properties":{"summary":{"type":"string","minLength":20,"maxLength":30},"count":{"type":"integer","minimum":3},
	"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"},"minItems":1},
	"kind":{"enum":["x","y"]},"score":{"type":"number","exclusiveMinimum":0.5,"maximum":10},
	"nested":{"allOf":[{"required":["a"]},{"properties":{"a":{"type":"integer"}}}]},
	"maybe":{"anyOf":[{"type":"null"},{"type":"string"}]},"ref":{"$ref":"#/$defs/r"},"unused":{"type":"string"}},
	"$defs":{"r":{"type":["null","integer"],"maximum":-2}}}`
	sys := "You are a helper.\n" + SchemaMarker + "\n" + schema + "\nNothing else."
	for _, msgs := range [][]model.Message{
		{{Role: model.RoleSystem, Content: sys}, user("Count the files")},
		{{Role: model.RoleSystem, Content: sys}, user("- a\n- b"), {Role: model.RoleAssistant, ToolCalls: []model.ToolCall{call("1", "a", "a")}},
			{Role: model.RoleTool, ToolCallID: "1", Content: "done"}},
	} {
		resp := gen(t, model.Request{Messages: msgs, Tools: []model.ToolSchema{agentTool}})
		var v any
		if err := json.Unmarshal([]byte(resp.Text), &v); err != nil {
			t.Fatalf("answer %q is not JSON: %v", resp.Text, err)
		}
		sch, err := spec.CompileSchema(json.RawMessage(schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("answer %s does not validate: %s", resp.Text, spec.SchemaErrorText(err))
		}
	}
	resp := gen(t, model.Request{Messages: []model.Message{{Role: model.RoleSystem, Content: sys}, user("Count the files")}})
	want := `{"count":3,"kind":"x","maybe":"done: Count the files","nested":{"a":0},"ok":true,"ref":-2,"score":1.5,"summary":"done: Count the files","tags":["done: Count the files"]}`
	if resp.Text != want {
		t.Errorf("answer\n%s\nwant\n%s", resp.Text, want)
	}
	for schema, want := range map[string]string{
		`{"type":"string"}`: `"done: x"`, `true`: `"done: x"`, `{"type":"array"}`: `[]`, `{"const":{"a":1}}`: `{"a":1}`,
		`{"properties":{"a":{}}}`: `{}`, `{"type":"null"}`: `null`, `{"type":"integer","maximum":-0.5}`: `-1`, `{"type":"integer","exclusiveMinimum":1.5}`: `2`,
		`{"type":"number","exclusiveMaximum":-3}`: `-4`, `{"type":"integer","minimum":0.2}`: `1`,
	} {
		resp := gen(t, model.Request{Messages: []model.Message{{Role: model.RoleSystem, Content: SchemaMarker + " " + schema}, user("x")}})
		if resp.Text != want {
			t.Errorf("schema %s: answer %s, want %s", schema, resp.Text, want)
		}
	}
}

func TestLatency(t *testing.T) {
	req := model.Request{Messages: []model.Message{user("x")}, Args: model.Args{"latency_ms": 30}}
	start := time.Now()
	if _, err := New().Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("returned after %v, want >= 30ms", d)
	}

	req.Args = model.Args{"latency_ms": 60_000}
	cause := errors.New("run cancelled")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(10*time.Millisecond, func() { cancel(cause) })
	start = time.Now()
	_, err := New().Generate(ctx, req)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("err = %v, want context.Canceled with cause", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if _, err := New().Generate(ctx, model.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("done ctx without latency: err = %v", err)
	}
}

func TestDeterministicAndConcurrent(t *testing.T) {
	req := model.Request{Messages: []model.Message{user("- a\n  - b\n- c")}, Tools: []model.ToolSchema{agentTool}, Args: model.Args{"latency_ms": 1}}
	first := gen(t, req)
	m := New()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			resp, err := m.Generate(context.Background(), req)
			if err == nil && !cmp.Equal(first, resp) {
				err = fmt.Errorf("got %+v, want %+v", resp, first)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
