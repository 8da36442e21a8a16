package quotaserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

func TestDefaultReply(t *testing.T) {
	user := func(s string) Message { return Message{Role: "user", Content: s} }
	tool := func(s string) Message { return Message{Role: "tool", Content: s, ToolCallID: "x"} }
	agent := []string{"read", "agent"}
	cases := []struct {
		name  string
		req   Request
		want  string // text, or "calls N"
		calls int
	}{
		{"fanout", Request{Messages: []Message{{Role: "system", Content: "fanout 9"}, user(" fanout  2 ")}, Tools: agent}, "", 2},
		{"fanout without the agent tool", Request{Messages: []Message{user("fanout 2")}, Tools: []string{"read"}}, "done: fanout 2", 0},
		{"fanout 0 is a leaf", Request{Messages: []Message{user("fanout 0")}, Tools: agent}, "done: fanout 0", 0},
		{"not a number", Request{Messages: []Message{user("fanout many")}, Tools: agent}, "done: fanout many", 0},
		{"results", Request{Messages: []Message{user("fanout 3"), {Role: "assistant"}, tool("done: a"), tool("oops"), tool(" done: c")}, Tools: agent},
			"collected 3 results, 2 done", 0},
		{"leaf answers the last user message", Request{Messages: []Message{user("leaf 4"), {Role: "assistant", Content: "?"}, user("try again")}},
			"done: try again", 0},
		{"no messages", Request{}, "done: ", 0},
	}
	for _, tc := range cases {
		got := DefaultReply(tc.req)
		if got.Text != tc.want || len(got.ToolCalls) != tc.calls {
			t.Errorf("%s: %q with %d calls, want %q with %d", tc.name, got.Text, len(got.ToolCalls), tc.want, tc.calls)
		}
	}
	r := DefaultReply(Request{Messages: []Message{user("fanout 200")}, Tools: agent})
	if c := r.ToolCalls[199]; c.ID != "call_200" || c.Name != "agent" || c.Arguments != `{"name":"h200","task":"leaf 200"}` {
		t.Errorf("call 200: %+v", c)
	}
}

func TestDecodeAnthropic(t *testing.T) {
	body := `{"model":"m","stream":true,"system":[{"type":"text","text":"be "},{"type":"text","text":"brief"}],
	"tools":[{"name":"agent","input_schema":{}}],
	"messages":[
	 {"role":"user","content":[{"type":"text","text":"fanout 2"}]},
	 {"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"c1","name":"agent","input":{"a":1}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"done: x"}]},
	                           {"type":"tool_result","tool_use_id":"c2","content":"failed"},
	                           {"type":"text","text":"go on"}]}]}`
	req, err := decode(Anthropic, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(req.Messages)
	want := `[{system be brief [] } {user fanout 2 [] } {assistant ok [{c1 agent {"a":1}}] } {tool done: x [] c1} {tool failed [] c2} {user go on [] }]`
	if got != want || !req.Stream || fmt.Sprint(req.Tools) != "[agent]" || req.InputTokens != len(body)/4 {
		t.Errorf("decoded %s, stream %v, tools %v, tokens %d\nwant     %s", got, req.Stream, req.Tools, req.InputTokens, want)
	}
}

func TestDecodeOpenAI(t *testing.T) {
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},
	"tools":[{"type":"function","function":{"name":"agent"}}],
	"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
	 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"agent","arguments":"{}"}}]},
	 {"role":"tool","tool_call_id":"c1","content":"done"}]}`
	req, err := decode(OpenAI, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(req.Messages)
	want := `[{system s [] } {user ab [] } {assistant  [{c1 agent {}}] } {tool done [] c1}]`
	if got != want || !req.Stream || !req.includeUsage || fmt.Sprint(req.Tools) != "[agent]" {
		t.Errorf("decoded %s, stream %v, usage %v, tools %v\nwant     %s", got, req.Stream, req.includeUsage, req.Tools, want)
	}
}

func TestCut(t *testing.T) {
	s := `{"task":"héllo wörld, ünïcode ☃☃☃☃ everywhere"}`
	pieces := cut(s, 5)
	if strings.Join(pieces, "") != s {
		t.Fatalf("pieces do not join to the input: %q", pieces)
	}
	for _, p := range pieces {
		if !utf8.ValidString(p) || len(p) == 0 || len(p) > 5 {
			t.Errorf("bad piece %q", p)
		}
	}
}

// TestRespondAndWideFanout checks a Respond hook's answer with text and
// tool calls, and a 200-call fan-out, through both SDKs' streams.
func TestRespondAndWideFanout(t *testing.T) {
	respond := func(req Request) Reply {
		if req.Messages[len(req.Messages)-1].Content == "mixed" {
			return Reply{Text: "Calling ☃ now.", ToolCalls: []ToolCall{{Name: "agent", Arguments: `{"task":"ünï"}`}, {ID: "x", Name: "other", Arguments: "not json"}}}
		}
		return DefaultReply(req)
	}
	t.Run("openai", func(t *testing.T) {
		s := start(t, Config{Respond: respond})
		svc := openai.NewChatCompletionService(ooption.WithBaseURL(s.BaseURL()), ooption.WithAPIKey("test"), ooption.WithMaxRetries(0))
		run := func(task string) openai.ChatCompletionMessage {
			stream := svc.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "m",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(task)},
				Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "agent"})}})
			defer stream.Close()
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("chunk refused: %s", stream.Current().RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			return acc.Choices[0].Message
		}
		m := run("mixed")
		if m.Content != "Calling ☃ now." || len(m.ToolCalls) != 2 || m.ToolCalls[0].ID != "call_1" ||
			m.ToolCalls[0].Function.Arguments != `{"task":"ünï"}` || m.ToolCalls[1].Function.Arguments != "{}" {
			t.Errorf("mixed answer %+v", m)
		}
		m = run("fanout 200")
		if len(m.ToolCalls) != 200 || m.ToolCalls[199].Function.Arguments != `{"name":"h200","task":"leaf 200"}` {
			t.Errorf("fanout 200: %d calls", len(m.ToolCalls))
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		s := start(t, Config{Format: Anthropic, Respond: respond})
		svc := anthropic.NewMessageService(aoption.WithBaseURL(s.BaseURL()), aoption.WithAPIKey("test"), aoption.WithMaxRetries(0))
		run := func(task string) anthropic.Message {
			stream := svc.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(task))},
				Tools:    []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "agent"}}}})
			defer stream.Close()
			var m anthropic.Message
			for stream.Next() {
				if err := m.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			return m
		}
		m := run("mixed")
		if len(m.Content) != 3 || m.Content[0].Text != "Calling ☃ now." || string(m.Content[1].Input) != `{"task":"ünï"}` ||
			m.Content[2].ID != "x" || string(m.Content[2].Input) != "{}" {
			t.Errorf("mixed answer %s", m.RawJSON())
		}
		m = run("fanout 200")
		if len(m.Content) != 200 || string(m.Content[199].Input) != `{"name":"h200","task":"leaf 200"}` {
			t.Errorf("fanout 200: %d blocks", len(m.Content))
		}
	})
}
