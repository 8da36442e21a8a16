package anthropic

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

func message(t *testing.T, body string) *anthropic.Message {
	t.Helper()
	var m anthropic.Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return &m
}

func TestResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want model.Response
	}{
		{"text blocks joined, thinking kept for the next turn", `{"type":"message","role":"assistant","content":[
			{"type":"thinking","thinking":"hmm","signature":"sig"},
			{"type":"text","text":"The nest "},{"type":"text","text":"is north."}],
			"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":4}}`,
			model.Response{Text: "The nest is north.", StopReason: "end_turn", Usage: model.Usage{InputTokens: 10, OutputTokens: 4},
				Reasoning: []model.Reasoning{{Text: "hmm", Signature: "sig"}}}},
		{"tool use in order with raw input", `{"content":[
			{"type":"text","text":"Checking."},
			{"type":"tool_use","id":"toolu_2","name":"b","input":{"z":1,"a":[1, 2]}},
			{"type":"tool_use","id":"toolu_1","name":"a","input":{}}],"stop_reason":"tool_use"}`,
			model.Response{Text: "Checking.", StopReason: "tool_use", ToolCalls: []model.ToolCall{
				{ID: "toolu_2", Name: "b", Arguments: `{"z":1,"a":[1, 2]}`},
				{ID: "toolu_1", Name: "a", Arguments: `{}`},
			}}},
		{"missing input is an empty object", `{"content":[{"type":"tool_use","id":"t","name":"a"}]}`,
			model.Response{ToolCalls: []model.ToolCall{{ID: "t", Name: "a", Arguments: `{}`}}}},
		{"cached input counts as input", `{"content":[],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7}}`,
			model.Response{Usage: model.Usage{InputTokens: 1103, OutputTokens: 7, CacheReadTokens: 1000, CacheWriteTokens: 100}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := response(message(t, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResponseBad(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"no content", `{"id":"msg_1","type":"message"}`},
		{"null content", `{"content":null}`},
		{"tool_use without id", `{"content":[{"type":"tool_use","name":"a","input":{}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := response(message(t, tc.body)); !errors.Is(err, model.ErrBadResponse) {
				t.Errorf("response = %v, want ErrBadResponse", err)
			}
		})
	}
	if _, err := response(nil); !errors.Is(err, model.ErrBadResponse) {
		t.Errorf("response(nil) = %v, want ErrBadResponse", err)
	}
}
