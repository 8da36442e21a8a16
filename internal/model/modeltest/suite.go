package modeltest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formica-run/formica/internal/model"
)

// Run runs every conformance case against the provider h adapts. Cases run
// in parallel, each with its own fake server.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Path == "" || h.New == nil || h.EncodeStream == nil || h.EncodeStreamError == nil ||
		h.EncodeReply == nil || h.EncodeError == nil ||
		h.DecodeRequest == nil || h.Credential == nil || h.TruncatedStop == "" || h.WrongBaseURL == nil {
		t.Fatal("modeltest: every Harness field is required")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, h)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, h Harness)
}{
	{"Text", testText},
	{"OneToolCall", testOneToolCall},
	{"TextAndToolCall", testTextAndToolCall},
	{"ParallelToolCalls", testParallelToolCalls},
	{"StopReasonKept", testStopReason},
	{"RequestCarriesConversation", testRequestCarriesConversation},
	{"ParallelToolCallsOff", testParallelOff},
	{"NoToolsNoParallelFlag", testNoTools},
	{"Unauthorized", testUnauthorized},
	{"BadRequest", testBadRequest},
	{"RateLimitedThenOK", testRateLimitedThenOK},
	{"RateLimitedNotCounted", testRateLimitedNotCounted},
	{"RetryAfterTooLong", testRetryAfterTooLong},
	{"RetryAfterHonoured", testRetryAfter},
	{"ServerErrorThenOK", testServerErrorThenOK},
	{"ServerErrorExhausted", testServerErrorExhausted},
	{"NoRetriesWhenDisabled", testNoRetries},
	{"HangUpRetried", testHangUp},
	{"MalformedJSON", testMalformedJSON},
	{"NotJSON", testNotJSON},
	{"CancelDuringResponse", testCancel},
	{"DeadlineDuringResponse", testDeadline},
	{"NoResponseRetried", testNoResponseRetried},
	{"Concurrent", testConcurrent},
	{"TruncatedWithoutAnswer", testTruncatedEmpty},
	{"TruncatedWithText", testTruncatedText},
	{"NotFoundNamesBaseURL", testNotFoundBaseURL},
	{"ReasoningSentBack", testReasoning},
	{"PlainJSONAnswer", testPlainJSON},
	{"CachedUsage", testCachedUsage},
	{"LongStreamOutlastsIdleTimeout", testLongStream},
	{"StallRetried", testStallRetried},
	{"StallError", testStallError},
	{"StreamCutRetried", testStreamCut},
	{"StreamErrorEvent", testStreamErrorEvent},
	{"MalformedEvent", testMalformedEvent},
	{"Gate", testGate},
	{"GateCancel", testGateCancel},
}

// hello is the smallest request: one user message.
var hello = model.Request{Model: "test-model", Messages: []model.Message{{Role: model.RoleUser, Content: "hello"}}}

// generate calls m with a bounded context, so a broken provider fails the
// case instead of hanging the test binary.
func generate(t *testing.T, m model.Model, req model.Request) (model.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return m.Generate(ctx, req)
}

func mustGenerate(t *testing.T, m model.Model, req model.Request) model.Response {
	t.Helper()
	resp, err := generate(t, m, req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return resp
}

func wantRequests(t *testing.T, s *server, n int) []Received {
	t.Helper()
	got := s.received()
	if len(got) != n {
		t.Fatalf("server saw %d requests, want %d", len(got), n)
	}
	return got
}

func testText(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "hello, ant", Usage: model.Usage{InputTokens: 12, OutputTokens: 3}})
	resp := mustGenerate(t, s.model(Options{}), hello)
	if resp.Text != "hello, ant" || len(resp.ToolCalls) != 0 {
		t.Errorf("got text %q and %d tool calls, want %q and none", resp.Text, len(resp.ToolCalls), "hello, ant")
	}
	if diff := cmp.Diff(model.Usage{InputTokens: 12, OutputTokens: 3}, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if resp.StopReason == "" {
		t.Error("empty StopReason")
	}
	got := wantRequests(t, s, 1)[0]
	if got.Model != "test-model" {
		t.Errorf("model sent = %q, want test-model", got.Model)
	}
	if got.APIKey != testKey {
		t.Errorf("credential sent = %q, want the configured key", got.APIKey)
	}
}

// testCachedUsage: the tokens read from and written to the prompt cache
// come back apart, inside the input count, streamed or not.
func testCachedUsage(t *testing.T, h Harness) {
	usage := model.Usage{InputTokens: 5000, OutputTokens: 20, CacheReadTokens: 3000, CacheWriteTokens: 1500}
	s := serve(t, h, Reply{Text: "cached", Usage: usage}, Reply{JSON: true, Text: "cached", Usage: usage})
	m := s.model(Options{})
	for _, how := range []string{"streamed", "one JSON object"} {
		resp := mustGenerate(t, m, hello)
		if diff := cmp.Diff(usage, resp.Usage); diff != "" {
			t.Errorf("%s: usage (-want +got):\n%s", how, diff)
		}
	}
}

func testOneToolCall(t *testing.T, h Harness) {
	calls := []model.ToolCall{{ID: "call_A1", Name: "search", Arguments: `{"q":"sugar","limit":3}`}}
	s := serve(t, h, Reply{ToolCalls: calls, Usage: model.Usage{InputTokens: 40, OutputTokens: 9}})
	resp := mustGenerate(t, s.model(Options{}), hello)
	if diff := cmp.Diff(calls, resp.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if resp.Text != "" {
		t.Errorf("text = %q, want none", resp.Text)
	}
	if resp.Usage != (model.Usage{InputTokens: 40, OutputTokens: 9}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

func testTextAndToolCall(t *testing.T, h Harness) {
	calls := []model.ToolCall{{ID: "call_B1", Name: "read", Arguments: `{"path":"nest.txt"}`}}
	s := serve(t, h, Reply{Text: "Let me look.", ToolCalls: calls})
	resp := mustGenerate(t, s.model(Options{}), hello)
	if resp.Text != "Let me look." {
		t.Errorf("text = %q", resp.Text)
	}
	if diff := cmp.Diff(calls, resp.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}

func testParallelToolCalls(t *testing.T, h Harness) {
	// Keys out of alphabetical order and nested values: a provider that
	// re-encodes arguments instead of passing the raw text fails here.
	calls := []model.ToolCall{
		{ID: "call_3", Name: "agent", Arguments: `{"task":"count the eggs","budget":{"steps":4}}`},
		{ID: "call_1", Name: "agent", Arguments: `{"z":1,"a":[true,null,"x"]}`},
		{ID: "call_2", Name: "search", Arguments: `{}`},
	}
	s := serve(t, h, Reply{ToolCalls: calls})
	resp := mustGenerate(t, s.model(Options{}), hello)
	if diff := cmp.Diff(calls, resp.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}

func testStopReason(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "cut", StopReason: "custom_stop"})
	if resp := mustGenerate(t, s.model(Options{}), hello); resp.StopReason != "custom_stop" {
		t.Errorf("StopReason = %q, want the server's word custom_stop", resp.StopReason)
	}
}

// conversation is a full turn cycle: system prompt, a user task, an
// assistant turn with two tool calls and both results.
var conversation = []model.Message{
	{Role: model.RoleSystem, Content: "You are a careful ant."},
	{Role: model.RoleUser, Content: "Find food."},
	{Role: model.RoleAssistant, Content: "Looking.", ToolCalls: []model.ToolCall{
		{ID: "call_s", Name: "search", Arguments: `{"q":"sugar"}`},
		{ID: "call_m", Name: "map", Arguments: `{"zoom":3}`},
	}},
	{Role: model.RoleTool, ToolCallID: "call_s", ToolName: "search", Content: "sugar at (1,2)"},
	{Role: model.RoleTool, ToolCallID: "call_m", ToolName: "map", Content: "map ok"},
}

var toolSchemas = []model.ToolSchema{
	{Name: "search", Description: "Search the field.", Parameters: json.RawMessage(
		`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`)},
	{Name: "map", Description: "Draw the map.", Parameters: json.RawMessage(
		`{"type":"object","properties":{"zoom":{"type":"integer","minimum":1}}}`)},
	// A tool without parameters must still be sent with an object schema.
	{Name: "wait", Description: "Wait a tick."},
}

func testRequestCarriesConversation(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "done"})
	mustGenerate(t, s.model(Options{}), model.Request{
		Model:             "test-model",
		Messages:          conversation,
		Tools:             toolSchemas,
		ParallelToolCalls: true,
		Args:              model.Args{"temperature": 0.25, "top_p": 0.5, "max_tokens": 321},
	})
	got := wantRequests(t, s, 1)[0]
	if got.System != "You are a careful ant." {
		t.Errorf("system = %q", got.System)
	}
	if diff := cmp.Diff(conversation[1:], got.Messages, cmpopts.IgnoreFields(model.Message{}, "ToolName"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(neutralTools(toolSchemas), neutralTools(got.Tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if got.ParallelToolCalls == nil || !*got.ParallelToolCalls {
		t.Errorf("parallel tool calls = %v, want true", ptr(got.ParallelToolCalls))
	}
	if got.MaxTokens != 321 {
		t.Errorf("max tokens = %d, want 321", got.MaxTokens)
	}
	for k, want := range map[string]any{"temperature": 0.25, "top_p": 0.5} {
		if got.Params[k] != want {
			t.Errorf("%s = %v, want %v (params %v)", k, got.Params[k], want, got.Params)
		}
	}
}

func testParallelOff(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "ok"})
	mustGenerate(t, s.model(Options{}), model.Request{Model: "test-model", Messages: hello.Messages, Tools: toolSchemas})
	if got := wantRequests(t, s, 1)[0].ParallelToolCalls; got == nil || *got {
		t.Errorf("parallel tool calls = %v, want false", ptr(got))
	}
}

func testNoTools(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "ok"})
	mustGenerate(t, s.model(Options{}), model.Request{Model: "test-model", Messages: hello.Messages, ParallelToolCalls: true})
	got := wantRequests(t, s, 1)[0]
	if got.ParallelToolCalls != nil || got.Tools != nil {
		t.Errorf("without tools the request says parallel=%v tools=%v, want neither", ptr(got.ParallelToolCalls), got.Tools)
	}
}

type neutralTool struct {
	Name, Description string
	Parameters        any
}

func neutralTools(ts []model.ToolSchema) []neutralTool {
	out := make([]neutralTool, 0, len(ts))
	for _, t := range ts {
		params := JSON(t.Parameters)
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		out = append(out, neutralTool{t.Name, t.Description, params})
	}
	return out
}

func ptr(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}
