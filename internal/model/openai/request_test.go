package openai

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

// wire marshals params the way the SDK sends them and decodes the JSON, so
// tests compare against the wire format rather than SDK structs.
func wire(t *testing.T, m *Model, req model.Request) map[string]any {
	t.Helper()
	p, err := m.params(req)
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

func local(t *testing.T) *Model {
	t.Helper()
	m, err := New(Config{BaseURL: "http://localhost:11434/v1", Model: "llama3"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []model.Message
		want string
	}{
		{"system and user", []model.Message{
			{Role: model.RoleSystem, Content: "be brief"},
			{Role: model.RoleUser, Content: "hi"},
		}, `[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]`},
		{"assistant text", []model.Message{{Role: model.RoleAssistant, Content: "hello"}},
			`[{"role":"assistant","content":"hello"}]`},
		{"empty assistant keeps content", []model.Message{{Role: model.RoleAssistant}},
			`[{"role":"assistant","content":""}]`},
		{"tool calls without text have no content", []model.Message{{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "c1", Name: "f", Arguments: `{"a": 1}`},
			{ID: "c2", Name: "g", Arguments: `not json`},
		}}}, `[{"role":"assistant","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},
			{"id":"c2","type":"function","function":{"name":"g","arguments":"not json"}}]}]`},
		{"text and tool call", []model.Message{{Role: model.RoleAssistant, Content: "on it", ToolCalls: []model.ToolCall{
			{ID: "c1", Name: "f", Arguments: `{}`},
		}}}, `[{"role":"assistant","content":"on it","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`},
		{"tool results by id", []model.Message{
			{Role: model.RoleTool, ToolCallID: "c1", ToolName: "f", Content: "one"},
			{Role: model.RoleTool, ToolCallID: "c2", Content: ""},
		}, `[{"role":"tool","tool_call_id":"c1","content":"one"},{"role":"tool","tool_call_id":"c2","content":""}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wire(t, local(t), model.Request{Messages: tc.in})["messages"]
			if diff := cmp.Diff(decode(t, tc.want), got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParamsErrors(t *testing.T) {
	user := []model.Message{{Role: model.RoleUser, Content: "hi"}}
	for _, tc := range []struct {
		name string
		req  model.Request
	}{
		{"unknown role", model.Request{Messages: []model.Message{{Role: "narrator"}}}},
		{"tool result without id", model.Request{Messages: []model.Message{{Role: model.RoleTool, Content: "x"}}}},
		{"schema not an object", model.Request{Messages: user, Tools: []model.ToolSchema{{Name: "f", Parameters: json.RawMessage(`[1]`)}}}},
		{"schema not JSON", model.Request{Messages: user, Tools: []model.ToolSchema{{Name: "f", Parameters: json.RawMessage(`{`)}}}},
		{"reserved arg", model.Request{Messages: user, Args: model.Args{"stream": true}}},
		{"reserved stream options", model.Request{Messages: user, Args: model.Args{"stream_options": map[string]any{"include_usage": false}}}},
		{"temperature not a number", model.Request{Messages: user, Args: model.Args{"temperature": "hot"}}},
		{"seed not an integer", model.Request{Messages: user, Args: model.Args{"seed": 1.5}}},
		{"max_tokens not an integer", model.Request{Messages: user, Args: model.Args{"max_tokens": "many"}}},
		{"stop list of numbers", model.Request{Messages: user, Args: model.Args{"stop": []any{1}}}},
		{"stop a number", model.Request{Messages: user, Args: model.Args{"stop": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := local(t).params(tc.req); !errors.Is(err, model.ErrBadRequest) {
				t.Errorf("params = %v, want ErrBadRequest", err)
			}
		})
	}
	m, _ := New(Config{BaseURL: "http://localhost/v1"})
	if _, err := m.params(model.Request{Messages: user}); !errors.Is(err, model.ErrBadRequest) {
		t.Errorf("no model name: %v, want ErrBadRequest", err)
	}
}

func TestModelName(t *testing.T) {
	m := local(t)
	if got := wire(t, m, model.Request{})["model"]; got != "llama3" {
		t.Errorf("default model = %v, want the config's llama3", got)
	}
	if got := wire(t, m, model.Request{Model: "qwen3"})["model"]; got != "qwen3" {
		t.Errorf("model = %v, want the request's qwen3", got)
	}
}

func TestTools(t *testing.T) {
	got := wire(t, local(t), model.Request{
		Tools: []model.ToolSchema{
			{Name: "f", Description: "does f", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)},
			{Name: "g"},
		},
		ParallelToolCalls: true,
	})
	want := decode(t, `[
		{"type":"function","function":{"name":"f","description":"does f","parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}},
		{"type":"function","function":{"name":"g","parameters":{"type":"object","properties":{}}}}]`)
	if diff := cmp.Diff(want, got["tools"]); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if got["parallel_tool_calls"] != true {
		t.Errorf("parallel_tool_calls = %v, want true", got["parallel_tool_calls"])
	}
	none := wire(t, local(t), model.Request{ParallelToolCalls: true})
	if _, ok := none["tools"]; ok {
		t.Error("tools sent without tools")
	}
	if _, ok := none["parallel_tool_calls"]; ok {
		t.Error("parallel_tool_calls sent without tools")
	}
}

func TestArgs(t *testing.T) {
	official, err := New(Config{APIKey: "sk-x", Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *Model
		args model.Args
		want map[string]any
	}{
		{"sampling", local(t), model.Args{"temperature": 0, "top_p": float32(0.5), "frequency_penalty": 0.1, "presence_penalty": int64(1)},
			map[string]any{"temperature": 0.0, "top_p": 0.5, "frequency_penalty": 0.1, "presence_penalty": 1.0}},
		{"seed from a YAML int and a JSON float", local(t), model.Args{"seed": 7}, map[string]any{"seed": 7.0}},
		{"seed from a JSON number", local(t), model.Args{"seed": json.Number("42")}, map[string]any{"seed": 42.0}},
		{"stop string", local(t), model.Args{"stop": "END"}, map[string]any{"stop": "END"}},
		{"stop list", local(t), model.Args{"stop": []any{"a", "b"}}, map[string]any{"stop": []any{"a", "b"}}},
		{"max_tokens stays elsewhere", local(t), model.Args{"max_tokens": 100}, map[string]any{"max_tokens": 100.0}},
		{"max_tokens becomes max_completion_tokens at OpenAI", official, model.Args{"max_tokens": 100}, map[string]any{"max_completion_tokens": 100.0}},
		{"max_completion_tokens kept", local(t), model.Args{"max_completion_tokens": 9}, map[string]any{"max_completion_tokens": 9.0}},
		{"prompt_cache_key replaced", local(t), model.Args{"prompt_cache_key": "mine"}, map[string]any{"prompt_cache_key": "mine"}},
		{"prompt_cache_key off", local(t), model.Args{"prompt_cache_key": false}, map[string]any{}},
		{"unknown keys pass through", local(t), model.Args{"reasoning_effort": "low", "response_format": map[string]any{"type": "json_object"}},
			map[string]any{"reasoning_effort": "low", "response_format": map[string]any{"type": "json_object"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wire(t, tc.m, model.Request{Args: tc.args, CacheKey: "thread-1"})
			if _, ok := tc.args["prompt_cache_key"]; !ok {
				if got["prompt_cache_key"] != "thread-1" {
					t.Errorf("prompt_cache_key = %v, want the request's CacheKey", got["prompt_cache_key"])
				}
				delete(got, "prompt_cache_key")
			}
			delete(got, "model")
			delete(got, "messages")
			delete(got, "stream_options")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request fields (-want +got):\n%s", diff)
			}
		})
	}
}

// The usage of a streamed answer comes only in a final chunk that
// stream_options asks for.
func TestStreamOptions(t *testing.T) {
	got := wire(t, local(t), model.Request{})
	if diff := cmp.Diff(map[string]any{"include_usage": true}, got["stream_options"]); diff != "" {
		t.Errorf("stream_options (-want +got):\n%s", diff)
	}
}
