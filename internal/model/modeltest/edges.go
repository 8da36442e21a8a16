package modeltest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

// testTruncatedEmpty: an answer the token limit cut off before any text or
// tool call is a failure naming the limit, not an empty success, and it is
// not retried (the same request would be cut off again).
func testTruncatedEmpty(t *testing.T, h Harness) {
	s := serve(t, h, Reply{StopReason: h.TruncatedStop, Usage: model.Usage{InputTokens: 10, OutputTokens: 64}})
	_, err := generate(t, s.model(Options{}), hello)
	if !errors.Is(err, model.ErrTruncated) || !strings.Contains(err.Error(), "model output truncated at max_tokens") {
		t.Fatalf("Generate: %v, want ErrTruncated", err)
	}
	wantRequests(t, s, 1)
}

// testTruncatedText: a cut-off answer that has text is still that answer.
func testTruncatedText(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "the first half", StopReason: h.TruncatedStop})
	if resp := mustGenerate(t, s.model(Options{}), hello); resp.Text != "the first half" {
		t.Fatalf("text %q, want the partial answer", resp.Text)
	}
}

// testNotFoundBaseURL: a base URL that lacks or doubles /v1 makes the
// server answer 404; the error says which base URL and what to change.
func testNotFoundBaseURL(t *testing.T, h Harness) {
	s := serve(t, h)
	s.wrongPathOK = true
	base := h.WrongBaseURL(s.srv.URL)
	_, err := generate(t, s.model(Options{BaseURL: base}), hello)
	if !errors.Is(err, model.ErrBadRequest) || !strings.Contains(err.Error(), "404") ||
		!strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), "/v1") {
		t.Fatalf("Generate with base URL %s: %v, want a 404 naming the base URL and /v1", base, err)
	}
}

// testReasoning: reasoning blocks come back in the response and, sent with
// their assistant turn, reach the server unchanged (signatures included).
func testReasoning(t *testing.T, h Harness) {
	if !h.Reasoning {
		t.Skip("the provider has no reasoning blocks")
	}
	reasoning := []model.Reasoning{{Text: "The user wants sugar; search first.", Signature: "EqQBCkYIARgCIkD0sig"}, {Redacted: "EmwKAhgBEgy3opaque"}}
	calls := []model.ToolCall{{ID: "toolu_1", Name: "search", Arguments: `{"q":"sugar"}`}}
	s := serve(t, h, Reply{Reasoning: reasoning, ToolCalls: calls}, Reply{Text: "found it"})
	m := s.model(Options{})
	resp := mustGenerate(t, m, model.Request{Model: "test-model", Tools: toolSchemas[:1], Messages: hello.Messages})
	if diff := cmp.Diff(reasoning, resp.Reasoning); diff != "" {
		t.Fatalf("reasoning (-want +got):\n%s", diff)
	}
	next := model.Request{Model: "test-model", Tools: toolSchemas[:1], Messages: []model.Message{
		hello.Messages[0],
		{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls, Reasoning: resp.Reasoning},
		{Role: model.RoleTool, ToolCallID: "toolu_1", ToolName: "search", Content: "sugar at (1,2)"},
	}}
	mustGenerate(t, m, next)
	got := wantRequests(t, s, 2)[1]
	if len(got.Messages) < 2 {
		t.Fatalf("second request has %d messages", len(got.Messages))
	}
	if diff := cmp.Diff(reasoning, got.Messages[1].Reasoning); diff != "" {
		t.Errorf("reasoning sent back (-want +got):\n%s", diff)
	}
}
