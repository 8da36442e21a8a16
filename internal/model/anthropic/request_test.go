package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

// wire marshals params the way the SDK sends them and decodes the JSON, so
// tests compare against the wire format rather than SDK structs. The
// cache_control breakpoints are left out (TestBreakpoints has them).
func wire(t *testing.T, req model.Request) map[string]any {
	t.Helper()
	out := wireCached(t, req)
	stripCacheControl(out)
	return out
}

func stripCacheControl(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "cache_control")
		for _, e := range v {
			stripCacheControl(e)
		}
	case []any:
		for _, e := range v {
			stripCacheControl(e)
		}
	}
}

// wireCached is wire with the breakpoints.
func wireCached(t *testing.T, req model.Request) map[string]any {
	t.Helper()
	p, _, err := testModel(t).params(req)
	if err != nil {
		t.Fatalf("params: %v", err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func testModel(t *testing.T) *Model {
	t.Helper()
	m, err := New(Config{APIKey: "sk-ant-test", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name         string
		in           []model.Message
		system, want string
	}{
		{"system to the system parameter, wherever it stands", []model.Message{
			{Role: model.RoleSystem, Content: "be brief"},
			{Role: model.RoleUser, Content: "hi"},
			{Role: model.RoleSystem, Content: "and kind"},
		}, `[{"type":"text","text":"be brief"},{"type":"text","text":"and kind"}]`,
			`[{"role":"user","content":[{"type":"text","text":"hi"}]}]`},
		{"tool calls become tool_use blocks after the text", []model.Message{
			{Role: model.RoleUser, Content: "go"},
			{Role: model.RoleAssistant, Content: "on it", ToolCalls: []model.ToolCall{
				{ID: "t1", Name: "f", Arguments: `{"a":1}`},
				{ID: "t2", Name: "g", Arguments: `not json`},
			}},
		}, ``, `[{"role":"user","content":[{"type":"text","text":"go"}]},
			{"role":"assistant","content":[{"type":"text","text":"on it"},
				{"type":"tool_use","id":"t1","name":"f","input":{"a":1}},
				{"type":"tool_use","id":"t2","name":"g","input":{}}]}]`},
		{"results and the next user message share one user turn", []model.Message{
			{Role: model.RoleUser, Content: "go"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "t1", Name: "f", Arguments: `{}`}, {ID: "t2", Name: "g", Arguments: `{}`}}},
			{Role: model.RoleTool, ToolCallID: "t1", ToolName: "f", Content: "one"},
			{Role: model.RoleTool, ToolCallID: "t2", ToolName: "g"},
			{Role: model.RoleUser, Content: "now sum them"},
		}, ``, `[{"role":"user","content":[{"type":"text","text":"go"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}},{"type":"tool_use","id":"t2","name":"g","input":{}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"one"}]},
				{"type":"tool_result","tool_use_id":"t2"},
				{"type":"text","text":"now sum them"}]}]`},
		{"empty text is left out", []model.Message{
			{Role: model.RoleUser, Content: "hi"},
			{Role: model.RoleAssistant, Content: ""},
			{Role: model.RoleUser, Content: "again"},
		}, ``, `[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"again"}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wire(t, model.Request{Messages: tc.in})
			if diff := cmp.Diff(decode(t, tc.want), got["messages"]); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			var wantSystem any
			if tc.system != "" {
				wantSystem = decode(t, tc.system)
			}
			if diff := cmp.Diff(wantSystem, got["system"]); diff != "" {
				t.Errorf("system (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTools(t *testing.T) {
	got := wire(t, model.Request{
		Tools: []model.ToolSchema{
			{Name: "f", Description: "does f", Parameters: json.RawMessage(
				`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false,"$defs":{"x":{}}}`)},
			{Name: "g", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "h"},
		},
	})
	want := decode(t, `[
		{"name":"f","description":"does f","input_schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false,"$defs":{"x":{}}}},
		{"name":"g","input_schema":{"type":"object","properties":{}}},
		{"name":"h","input_schema":{"type":"object","properties":{}}}]`)
	if diff := cmp.Diff(want, got["tools"]); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(decode(t, `{"type":"auto","disable_parallel_tool_use":true}`), got["tool_choice"]); diff != "" {
		t.Errorf("tool_choice (-want +got):\n%s", diff)
	}
	parallel := wire(t, model.Request{Tools: []model.ToolSchema{{Name: "h"}}, ParallelToolCalls: true})
	if diff := cmp.Diff(decode(t, `{"type":"auto","disable_parallel_tool_use":false}`), parallel["tool_choice"]); diff != "" {
		t.Errorf("tool_choice with parallel calls (-want +got):\n%s", diff)
	}
	none := wire(t, model.Request{ParallelToolCalls: true})
	for _, k := range []string{"tools", "tool_choice"} {
		if _, ok := none[k]; ok {
			t.Errorf("%s sent without tools", k)
		}
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args model.Args
		want map[string]any
	}{
		{"max_tokens defaults", nil, map[string]any{"max_tokens": 4096.0}},
		{"max_tokens", model.Args{"max_tokens": 512}, map[string]any{"max_tokens": 512.0}},
		{"max_completion_tokens is an alias", model.Args{"max_completion_tokens": 256.0}, map[string]any{"max_tokens": 256.0}},
		{"sampling", model.Args{"temperature": 0.2, "top_p": 0.9, "top_k": 40},
			map[string]any{"max_tokens": 4096.0, "temperature": 0.2, "top_p": 0.9, "top_k": 40.0}},
		{"stop string", model.Args{"stop": "END"}, map[string]any{"max_tokens": 4096.0, "stop_sequences": []any{"END"}}},
		{"stop_sequences list", model.Args{"stop_sequences": []string{"a", "b"}}, map[string]any{"max_tokens": 4096.0, "stop_sequences": []any{"a", "b"}}},
		{"OpenAI-only args dropped", model.Args{"seed": 1, "frequency_penalty": 0.5, "presence_penalty": 0.5}, map[string]any{"max_tokens": 4096.0}},
		{"unknown keys pass through", model.Args{"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}, "service_tier": "auto"},
			map[string]any{"max_tokens": 4096.0, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024.0}, "service_tier": "auto"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wire(t, model.Request{Args: tc.args})
			delete(got, "model")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request fields (-want +got):\n%s", diff)
			}
		})
	}
	_, dropped, err := testModel(t).params(model.Request{Args: model.Args{"seed": 1, "temperature": 1}})
	if err != nil || !cmp.Equal(dropped, []string{"seed"}) {
		t.Errorf("dropped = %v, %v; want [seed]", dropped, err)
	}
}

func TestParamsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  model.Request
	}{
		{"unknown role", model.Request{Messages: []model.Message{{Role: "narrator", Content: "x"}}}},
		{"tool result without id", model.Request{Messages: []model.Message{{Role: model.RoleTool, Content: "x"}}}},
		{"schema not an object", model.Request{Tools: []model.ToolSchema{{Name: "f", Parameters: json.RawMessage(`"x"`)}}}},
		{"reserved arg", model.Request{Args: model.Args{"system": "sneaky"}}},
		{"max_tokens zero", model.Request{Args: model.Args{"max_tokens": 0}}},
		{"max_tokens fractional", model.Request{Args: model.Args{"max_tokens": 1.5}}},
		{"temperature not a number", model.Request{Args: model.Args{"temperature": "hot"}}},
		{"stop a number", model.Request{Args: model.Args{"stop": 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := testModel(t).params(tc.req); !errors.Is(err, model.ErrBadRequest) {
				t.Errorf("params = %v, want ErrBadRequest", err)
			}
		})
	}
	m, _ := New(Config{APIKey: "k"})
	if _, _, err := m.params(model.Request{}); !errors.Is(err, model.ErrBadRequest) {
		t.Errorf("no model name: %v, want ErrBadRequest", err)
	}
}

// breakpointsAt lists where a request's cache_control breakpoints are:
// "tools[i]", "system[i]", "messages[i].content[j]", each with its value.
func breakpointsAt(t *testing.T, w map[string]any) map[string]any {
	t.Helper()
	got := map[string]any{}
	list := func(v any) []any { l, _ := v.([]any); return l }
	for i, tl := range list(w["tools"]) {
		if cc, ok := tl.(map[string]any)["cache_control"]; ok {
			got[fmt.Sprintf("tools[%d]", i)] = cc
		}
	}
	for i, b := range list(w["system"]) {
		if cc, ok := b.(map[string]any)["cache_control"]; ok {
			got[fmt.Sprintf("system[%d]", i)] = cc
		}
	}
	for i, m := range list(w["messages"]) {
		for j, b := range list(m.(map[string]any)["content"]) {
			if cc, ok := b.(map[string]any)["cache_control"]; ok {
				got[fmt.Sprintf("messages[%d].content[%d]", i, j)] = cc
			}
		}
	}
	return got
}

func TestBreakpoints(t *testing.T) {
	eph := map[string]any{"type": "ephemeral"}
	tools := []model.ToolSchema{{Name: "read_file"}, {Name: "bash"}}
	system := model.Message{Role: model.RoleSystem, Content: "You are a careful agent."}
	task := model.Message{Role: model.RoleUser, Content: "count the files"}
	turn := func(id string) []model.Message {
		return []model.Message{
			{Role: model.RoleAssistant, Reasoning: []model.Reasoning{{Text: "hmm", Signature: "sig"}},
				ToolCalls: []model.ToolCall{{ID: id + "a", Name: "bash", Arguments: `{}`}, {ID: id + "b", Name: "bash", Arguments: `{}`}}},
			{Role: model.RoleTool, ToolCallID: id + "a", Content: "1"},
			{Role: model.RoleTool, ToolCallID: id + "b", Content: "2"},
		}
	}
	conv := func(turns ...string) []model.Message {
		out := []model.Message{system, task}
		for _, id := range turns {
			out = append(out, turn(id)...)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		req  model.Request
		want map[string]any
	}{
		{"first turn: tools, system and the task", model.Request{Tools: tools, Messages: conv()},
			map[string]any{"tools[1]": eph, "system[0]": eph, "messages[0].content[0]": eph}},
		{"second turn: the first request's end is read, the whole written", model.Request{Tools: tools, Messages: conv("t1")},
			// messages: [user task] [assistant thinking, tool_use, tool_use] [user result, result]
			map[string]any{"tools[1]": eph, "system[0]": eph, "messages[0].content[0]": eph, "messages[2].content[1]": eph}},
		{"later turns: four breakpoints, the limit", model.Request{Tools: tools, Messages: conv("t1", "t2", "t3")},
			map[string]any{"tools[1]": eph, "system[0]": eph, "messages[4].content[1]": eph, "messages[6].content[1]": eph}},
		{"no tools, no system", model.Request{Messages: []model.Message{task, turn("t1")[0], turn("t1")[1], turn("t1")[2]}},
			map[string]any{"messages[0].content[0]": eph, "messages[2].content[1]": eph}},
		{"thinking never carries one", model.Request{Messages: []model.Message{task,
			{Role: model.RoleAssistant, Reasoning: []model.Reasoning{{Text: "hmm", Signature: "sig"}}, Content: "done"}}},
			map[string]any{"messages[1].content[1]": eph}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := breakpointsAt(t, wireCached(t, tc.req))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("breakpoints (-want +got):\n%s", diff)
			}
			if len(got) > 4 {
				t.Errorf("%d breakpoints, the API allows 4", len(got))
			}
		})
	}
}
