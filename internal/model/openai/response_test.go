package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"

	"github.com/formica-run/formica/internal/model"
)

func completion(t *testing.T, body string) *openai.ChatCompletion {
	t.Helper()
	var c openai.ChatCompletion
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return &c
}

func TestResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want model.Response
	}{
		{"text", `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
			model.Response{Text: "hi", StopReason: "stop", Usage: model.Usage{InputTokens: 5, OutputTokens: 2}}},
		{"invalid arguments kept verbatim", `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1, oops"}}]},"finish_reason":"tool_calls"}]}`,
			model.Response{StopReason: "tool_calls", ToolCalls: []model.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a": 1, oops`}}}},
		{"refusal is the answer", `{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
			model.Response{Text: "I can't help with that.", StopReason: "stop"}},
		{"only the first choice", `{"choices":[{"message":{"content":"one"}},{"message":{"content":"two"}}]}`,
			model.Response{Text: "one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := response(completion(t, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResponseMissingIDs(t *testing.T) {
	// Some local servers send tool calls without ids; results are linked by
	// id, so each call gets a fresh one.
	body := `{"choices":[{"message":{"tool_calls":[
		{"type":"function","function":{"name":"f","arguments":"{}"}},
		{"function":{"name":"g","arguments":"{}"}}]}}]}`
	got, err := response(completion(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ToolCalls) != 2 {
		t.Fatalf("got %d tool calls", len(got.ToolCalls))
	}
	a, b := got.ToolCalls[0].ID, got.ToolCalls[1].ID
	if !strings.HasPrefix(a, "call_") || !strings.HasPrefix(b, "call_") || a == b {
		t.Errorf("ids %q and %q, want two distinct call_ ids", a, b)
	}
}

func TestResponseBad(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"no choices", `{"id":"x","choices":[]}`},
		{"empty object", `{}`},
		{"custom tool call", `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"custom","custom":{"name":"f","input":"x"}}]}}]}`},
		{"tool call without a name", `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := response(completion(t, tc.body)); !errors.Is(err, model.ErrBadResponse) {
				t.Errorf("response = %v, want ErrBadResponse", err)
			}
		})
	}
	if _, err := response(nil); !errors.Is(err, model.ErrBadResponse) {
		t.Errorf("response(nil) = %v, want ErrBadResponse", err)
	}
}
