package scripted

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

const script = `
responses:
  - when: "- a"
    tool_calls:
      - {name: agent, arguments: {name: a, task: "do a", n: 2, ok: true, list: [1, x]}}
      - id: mine
        name: agent
        arguments: '{"name": "b", broken'
    usage: {input_tokens: 10, output_tokens: 4}
  - when: "- a"
    text: "a and b done"
  - when: "do a"
    text: "done a"
  - when: "explode"
    error: "provider exploded"
  - text: "generic"
  - text: "generic again"
    tool_calls: [{name: read_file}]
`

func msgs(first string, assistants int) []model.Message {
	out := []model.Message{{Role: model.RoleSystem, Content: "sys"}, {Role: model.RoleUser, Content: first}}
	for i := range assistants {
		out = append(out, model.Message{Role: model.RoleAssistant, Content: "x"},
			model.Message{Role: model.RoleTool, ToolCallID: "t", Content: "r"}, model.Message{Role: model.RoleUser, Content: "later - a " + string(rune('0'+i))})
	}
	return out
}

func TestReplay(t *testing.T) {
	m, err := Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		first      string
		assistants int
		want       model.Response
		wantErr    string
	}{
		{"first turn of matching conversation", "Plan:\n- a\n- b", 0, model.Response{
			ToolCalls: []model.ToolCall{
				{ID: "call_0_1", Name: "agent", Arguments: `{"name":"a","task":"do a","n":2,"ok":true,"list":[1,"x"]}`},
				{ID: "mine", Name: "agent", Arguments: `{"name": "b", broken`},
			},
			Usage: model.Usage{InputTokens: 10, OutputTokens: 4}, StopReason: "tool_calls"}, ""},
		{"second turn", "Plan:\n- a\n- b", 1, model.Response{Text: "a and b done", StopReason: "stop"}, ""},
		{"unconditional responses follow", "Plan:\n- a\n- b", 2, model.Response{Text: "generic", StopReason: "stop"}, ""},
		{"ids use k", "Plan:\n- a\n- b", 3, model.Response{Text: "generic again", StopReason: "tool_calls",
			ToolCalls: []model.ToolCall{{ID: "call_3_1", Name: "read_file", Arguments: "{}"}}}, ""},
		{"past the end", "Plan:\n- a\n- b", 4, model.Response{},
			`scripted model has no response left: scripted: k=4 assistant messages, but only 4 responses match the conversation starting "Plan:"`},
		{"helper conversation", "do a", 0, model.Response{Text: "done a", StopReason: "stop"}, ""},
		{"only the first user message selects", "other", 0, model.Response{Text: "generic", StopReason: "stop"}, ""},
		{"error", "please explode", 0, model.Response{}, "provider exploded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.Generate(context.Background(), model.Request{Messages: msgs(tt.first, tt.assistants)})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	m, err := Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), model.Request{Messages: msgs("explode", 0)})
	var se *Error
	if !errors.As(err, &se) || se.Text != "provider exploded" {
		t.Errorf("err = %v, want *Error", err)
	}
	_, err = m.Generate(context.Background(), model.Request{Messages: msgs("x", 9)})
	if !errors.Is(err, ErrExhausted) {
		t.Errorf("err = %v, want ErrExhausted", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Generate(ctx, model.Request{Messages: msgs("x", 0)}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.json")
	json := `{"responses": [{"when": "hi", "tool_calls": [{"name": "agent", "arguments": {"name": "x", "task": "y"}}]}]}`
	if err := os.WriteFile(p, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Generate(context.Background(), model.Request{Messages: msgs("hi there", 0)})
	if err != nil || got.ToolCalls[0].Arguments != `{"name":"x","task":"y"}` {
		t.Errorf("Generate = %+v, %v", got, err)
	}
	_, err = m.Generate(context.Background(), model.Request{Messages: msgs("hi there", 1)})
	want := "scripted model has no response left: " + p + `: k=1 assistant messages, but only 1 responses match the conversation starting "hi there"`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]string{
		"":                          "bad scripted model file: scripted: empty file",
		"responses: []\n":           "bad scripted model file: scripted: no responses",
		"responses:\n  - txt: hi\n": `bad scripted model file: scripted:2: unknown key "txt"`,
		"respones: []\n":            `bad scripted model file: scripted:1: unknown key "respones"`,
		"responses: [{usage: {input_tokens: x}}]\n":                         "bad scripted model file: scripted:1: cannot unmarshal !!str `x` into int64",
		"responses: [{tool_calls: [{arguments: {}}]}]\n":                    "bad scripted model file: scripted: responses[0].tool_calls[0].name: required",
		"responses: [{text: a, error: b}]\n":                                "bad scripted model file: scripted: responses[0]: error excludes text and tool_calls",
		"responses: [{tool_calls: [{name: t, arguments: {<<: {a: 1}}}]}]\n": "bad scripted model file: scripted: responses[0].tool_calls[0].arguments: line 1: keys must be plain scalars",
		"responses: [\n": "bad scripted model file: scripted:1: did not find expected node content",
	}
	for in, want := range tests {
		_, err := Parse([]byte(in))
		if err == nil || err.Error() != want || !errors.Is(err, ErrBadScript) {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestConcurrentReplay(t *testing.T) {
	m, err := Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			first := "do a"
			if i%2 == 0 {
				first = "- a"
			}
			resp, err := m.Generate(context.Background(), model.Request{Messages: msgs(first, 1)})
			want := map[string]string{"do a": "generic", "- a": "a and b done"}[first]
			if err != nil || resp.Text != want {
				t.Errorf("thread %d: %+v %v, want %q", i, resp, err, want)
			}
		})
	}
	wg.Wait()
}
