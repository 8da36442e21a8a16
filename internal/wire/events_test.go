package wire

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
)

// A thread's events cross the wire with every field a worker may set, and
// without the ones the coordinator stamps (run, thread, parent, depth, name).
func TestEventsRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in := Progress{ThreadID: "t1", Token: "tok", Events: Events{
		{Type: event.ModelCall, Time: at, Model: "sim", Usage: model.Usage{InputTokens: 12, OutputTokens: 7},
			Latency: event.Duration(1500 * time.Microsecond)},
		{Type: event.ModelCall, Time: at, Model: "openai:gpt-4o", Usage: model.Usage{InputTokens: 5000, OutputTokens: 7,
			CacheReadTokens: 4096, CacheWriteTokens: 12, CostUSD: 0.0036275, Priced: 1}},
		{Type: event.ModelCall, Time: at, Model: "sim", Usage: model.Usage{InputTokens: 3, OutputTokens: 1, Unpriced: 1}},
		{Type: event.ToolCall, Time: at, Tool: "bash", CallID: "c1", Arguments: `{"command":"ls"}`},
		{Type: event.ToolResult, Time: at, Tool: "bash", CallID: "c1", Output: "a\nb"},
		{Type: event.ApprovalRequested, Time: at, Tool: "bash", Arguments: `{"command":"pay"}`, InDoubt: true},
		{Type: event.ToolResult, Time: at, Tool: "bash", CallID: "c2", Output: "Tool call in doubt", InDoubt: true},
		{Type: event.ApprovalResolved, Time: at, Tool: "bash", Decision: "deny", Reason: "denied by a user"},
		{Type: event.ThreadHandoff, Time: at, Reason: "a -> b", Status: event.Running, Worker: "w1"},
	}}
	var out Progress
	if err := DecodeAs(MustEncode(TypeProgress, in), TypeProgress, &out); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Fatalf("(-in +out)\n%s", d)
	}

	stamped := Events{{Type: event.ToolCall, RunID: "r", ThreadID: "t", ParentID: "p", Depth: 2, Name: "n", Tool: "x"}}
	var got ExecResult
	if err := DecodeAs(MustEncode(TypeExecResult, ExecResult{Events: stamped}), TypeExecResult, &got); err != nil {
		t.Fatal(err)
	}
	if want := (Events{{Type: event.ToolCall, Tool: "x", Time: got.Events[0].Time}}); !cmp.Equal(got.Events, want) {
		t.Errorf("identity fields crossed the wire: %+v", got.Events)
	}

	var none Progress
	if err := DecodeAs(MustEncode(TypeProgress, Progress{Token: "t"}), TypeProgress, &none); err != nil || none.Events != nil {
		t.Errorf("no events: %+v, %v", none, err)
	}
}
