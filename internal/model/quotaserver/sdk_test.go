package quotaserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// bodySize is a middleware recording the size of the last request body, to
// check the input tokens the server reports.
type bodySize struct{ n atomic.Int64 }

func (b *bodySize) middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if req.Body != nil {
		raw, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		b.n.Store(int64(len(raw)))
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	return next(req)
}

func (b *bodySize) tokens() int64 { return b.n.Load() / 4 }

// wantCalls is the fan-out of "fanout 3".
var wantCalls = []ToolCall{
	{ID: "call_1", Name: "agent", Arguments: `{"name":"h1","task":"leaf 1"}`},
	{ID: "call_2", Name: "agent", Arguments: `{"name":"h2","task":"leaf 2"}`},
	{ID: "call_3", Name: "agent", Arguments: `{"name":"h3","task":"leaf 3"}`},
}

// outputTokens is the documented output count for an answer.
func outputTokens(text string, calls []ToolCall) int64 {
	n := len(text)
	for _, c := range calls {
		n += len(c.Name) + len(c.Arguments)
	}
	return int64(n/4 + 1)
}

func TestOpenAISDK(t *testing.T) {
	s := start(t, Config{Format: OpenAI, Latency: 20 * time.Millisecond, StreamOnly: false})
	var size bodySize
	svc := openai.NewChatCompletionService(ooption.WithBaseURL(s.BaseURL()), ooption.WithAPIKey("test"),
		ooption.WithMaxRetries(0), ooption.WithMiddleware(size.middleware))
	agent := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       "agent",
		Parameters: shared.FunctionParameters{"type": "object"},
	})}
	var root []openai.ChatCompletionMessageToolCallUnionParam
	for _, c := range wantCalls {
		root = append(root, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments}}})
	}
	cases := []struct {
		name      string
		messages  []openai.ChatCompletionMessageParamUnion
		wantText  string
		wantCalls []ToolCall
	}{
		{"fanout", []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a root."), openai.UserMessage("fanout 3")}, "", wantCalls},
		{"collected", []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("fanout 3"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: root}},
			openai.ToolMessage("done: leaf 1", "call_1"),
			openai.ToolMessage("error: no luck", "call_2"),
			openai.ToolMessage("done: leaf 3", "call_3"),
		}, "collected 3 results, 2 done", nil},
		{"leaf", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("leaf 7")}, "done: leaf 7", nil},
	}
	for _, tc := range cases {
		params := openai.ChatCompletionNewParams{Model: "test-model", Messages: tc.messages, Tools: agent}
		check := func(t *testing.T, cc *openai.ChatCompletion) {
			t.Helper()
			if len(cc.Choices) != 1 {
				t.Fatalf("%d choices", len(cc.Choices))
			}
			msg := cc.Choices[0].Message
			if msg.Content != tc.wantText {
				t.Errorf("text %q, want %q", msg.Content, tc.wantText)
			}
			var got []ToolCall
			for _, c := range msg.ToolCalls {
				got = append(got, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantCalls) {
				t.Errorf("tool calls %v, want %v", got, tc.wantCalls)
			}
			wantFinish := map[bool]string{true: "tool_calls", false: "stop"}[len(tc.wantCalls) > 0]
			if cc.Choices[0].FinishReason != wantFinish {
				t.Errorf("finish reason %q, want %q", cc.Choices[0].FinishReason, wantFinish)
			}
			u := cc.Usage
			if u.PromptTokens != size.tokens() || u.CompletionTokens != outputTokens(tc.wantText, tc.wantCalls) ||
				u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %d+%d=%d, want %d+%d", u.PromptTokens, u.CompletionTokens, u.TotalTokens,
					size.tokens(), outputTokens(tc.wantText, tc.wantCalls))
			}
			if cc.Model != "test-model" {
				t.Errorf("model %q", cc.Model)
			}
		}
		t.Run(tc.name+"/plain", func(t *testing.T) {
			cc, err := svc.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			check(t, cc)
		})
		t.Run(tc.name+"/stream", func(t *testing.T) {
			p := params
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := svc.NewStreaming(context.Background(), p)
			defer stream.Close()
			var acc openai.ChatCompletionAccumulator
			chunks := 0
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("chunk %d not accumulated: %s", chunks, stream.Current().RawJSON())
				}
				chunks++
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if chunks < 3 {
				t.Errorf("only %d chunks", chunks)
			}
			check(t, &acc.ChatCompletion)
		})
	}

	t.Run("stream without usage", func(t *testing.T) {
		stream := svc.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("leaf 1")}})
		defer stream.Close()
		for stream.Next() {
			if c := stream.Current(); c.JSON.Usage.Valid() || len(c.Choices) == 0 {
				t.Errorf("usage or no choice in a stream without include_usage: %s", c.RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAnthropicSDK(t *testing.T) {
	s := start(t, Config{Format: Anthropic, Latency: 20 * time.Millisecond})
	var size bodySize
	svc := anthropic.NewMessageService(aoption.WithBaseURL(s.BaseURL()), aoption.WithAPIKey("test"),
		aoption.WithMaxRetries(0), aoption.WithMiddleware(size.middleware))
	agent := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "agent",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}}
	var root []anthropic.ContentBlockParamUnion
	for _, c := range wantCalls {
		root = append(root, anthropic.NewToolUseBlock(c.ID, json.RawMessage(c.Arguments), c.Name))
	}
	cases := []struct {
		name      string
		messages  []anthropic.MessageParam
		wantText  string
		wantCalls []ToolCall
	}{
		{"fanout", []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("fanout 3"))}, "", wantCalls},
		{"collected", []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("fanout 3")),
			anthropic.NewAssistantMessage(root...),
			anthropic.NewUserMessage(
				anthropic.NewToolResultBlock("call_1", "done: leaf 1", false),
				anthropic.NewToolResultBlock("call_2", "error: no luck", true),
				anthropic.NewToolResultBlock("call_3", "done: leaf 3", false)),
		}, "collected 3 results, 2 done", nil},
		{"leaf", []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("leaf 7"))}, "done: leaf 7", nil},
	}
	for _, tc := range cases {
		params := anthropic.MessageNewParams{Model: "test-model", MaxTokens: 1000, Messages: tc.messages, Tools: agent,
			System: []anthropic.TextBlockParam{{Text: "You are an agent."}}}
		check := func(t *testing.T, m *anthropic.Message) {
			t.Helper()
			var text strings.Builder
			var got []ToolCall
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "tool_use":
					got = append(got, ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
				default:
					t.Errorf("block type %q", b.Type)
				}
			}
			if text.String() != tc.wantText {
				t.Errorf("text %q, want %q", text.String(), tc.wantText)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantCalls) {
				t.Errorf("tool calls %v, want %v", got, tc.wantCalls)
			}
			wantStop := map[bool]anthropic.StopReason{true: "tool_use", false: "end_turn"}[len(tc.wantCalls) > 0]
			if m.StopReason != wantStop {
				t.Errorf("stop reason %q, want %q", m.StopReason, wantStop)
			}
			if m.Usage.InputTokens != size.tokens() || m.Usage.OutputTokens != outputTokens(tc.wantText, tc.wantCalls) {
				t.Errorf("usage %d/%d, want %d/%d", m.Usage.InputTokens, m.Usage.OutputTokens,
					size.tokens(), outputTokens(tc.wantText, tc.wantCalls))
			}
			if m.Model != "test-model" || m.Role != "assistant" {
				t.Errorf("model %q, role %q", m.Model, m.Role)
			}
		}
		t.Run(tc.name+"/plain", func(t *testing.T) {
			m, err := svc.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			check(t, m)
		})
		t.Run(tc.name+"/stream", func(t *testing.T) {
			stream := svc.NewStreaming(context.Background(), params)
			defer stream.Close()
			var m anthropic.Message
			events := 0
			for stream.Next() {
				if err := m.Accumulate(stream.Current()); err != nil {
					t.Fatalf("event %d: %v", events, err)
				}
				events++
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			check(t, &m)
		})
	}
}

// TestSDKErrors checks that both SDKs decode the 429s and the StreamOnly 400s.
func TestSDKErrors(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		s := start(t, Config{Format: OpenAI, RequestsPerMinute: 1, StreamOnly: true})
		svc := openai.NewChatCompletionService(ooption.WithBaseURL(s.BaseURL()), ooption.WithAPIKey("test"), ooption.WithMaxRetries(0))
		params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("leaf 1")}}
		_, err := svc.New(context.Background(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" {
			t.Fatalf("non-streaming request: %v, want a 400 invalid_request_error", err)
		}
		drain := func() error {
			stream := svc.NewStreaming(context.Background(), params)
			defer stream.Close()
			for stream.Next() {
			}
			return stream.Err()
		}
		if err := drain(); err != nil {
			t.Fatal(err)
		}
		err = drain()
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type != "rate_limit_error" ||
			apiErr.Code != "rate_limit_exceeded" || apiErr.Response.Header.Get("Retry-After") != "60" {
			t.Fatalf("second stream: %v, want a 429 rate_limit_error with Retry-After 60", err)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		s := start(t, Config{Format: Anthropic, RequestsPerMinute: 1, StreamOnly: true})
		svc := anthropic.NewMessageService(aoption.WithBaseURL(s.BaseURL()), aoption.WithAPIKey("test"), aoption.WithMaxRetries(0))
		params := anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("leaf 1"))}}
		_, err := svc.New(context.Background(), params)
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" {
			t.Fatalf("non-streaming request: %v, want a 400 invalid_request_error", err)
		}
		drain := func() error {
			stream := svc.NewStreaming(context.Background(), params)
			defer stream.Close()
			for stream.Next() {
			}
			return stream.Err()
		}
		if err := drain(); err != nil {
			t.Fatal(err)
		}
		err = drain()
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" ||
			apiErr.RequestID == "" || apiErr.Response.Header.Get("Retry-After") != "60" {
			t.Fatalf("second stream: %v, want a 429 rate_limit_error with Retry-After 60", err)
		}
	})
}

// TestStreamFor checks a long answer: filler every ChunkEvery for
// StreamFor, streamed and not, and that it takes that long.
func TestStreamFor(t *testing.T) {
	s := start(t, Config{StreamFor: 300 * time.Millisecond, ChunkEvery: 50 * time.Millisecond})
	svc := openai.NewChatCompletionService(ooption.WithBaseURL(s.BaseURL()), ooption.WithAPIKey("test"), ooption.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("leaf 1")}}
	want := "done: leaf 1......"

	began := time.Now()
	stream := svc.NewStreaming(context.Background(), params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var arrivals []time.Time
	for stream.Next() {
		acc.AddChunk(stream.Current())
		arrivals = append(arrivals, time.Now())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 300*time.Millisecond {
		t.Errorf("stream took %v, want at least 300ms", d)
	}
	if got := acc.Choices[0].Message.Content; got != want {
		t.Errorf("streamed %q, want %q", got, want)
	}
	// Spread out, not all at the end: the first chunk well before the last.
	if len(arrivals) < 8 || arrivals[len(arrivals)-1].Sub(arrivals[0]) < 200*time.Millisecond {
		t.Errorf("%d chunks over %v", len(arrivals), arrivals[len(arrivals)-1].Sub(arrivals[0]))
	}

	cc, err := svc.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Choices[0].Message.Content != want {
		t.Errorf("answered %q, want %q", cc.Choices[0].Message.Content, want)
	}
}

// TestStallWithSDK checks that an SDK stream with a deadline sees the first
// events of a stalled answer, then its deadline.
func TestStallWithSDK(t *testing.T) {
	s := start(t, Config{Format: Anthropic, StallAfter: 3})
	svc := anthropic.NewMessageService(aoption.WithBaseURL(s.BaseURL()), aoption.WithAPIKey("test"), aoption.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	stream := svc.NewStreaming(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("leaf 1"))}})
	defer stream.Close()
	var types []string
	for stream.Next() {
		types = append(types, string(stream.Current().Type))
	}
	if !errors.Is(stream.Err(), context.DeadlineExceeded) {
		t.Errorf("stream error %v, want the deadline", stream.Err())
	}
	// The SDK does not pass on the ping, the second event.
	if got := strings.Join(types, " "); got != "message_start content_block_start" {
		t.Errorf("events before the stall: %s", got)
	}
}
