package journal

import (
	"testing"

	"github.com/formica-run/formica/internal/model"
)

// TestReplayInDoubt: a call is in doubt when its last start has no result
// after it; a result after a start answers it, and every start counts.
func TestReplayInDoubt(t *testing.T) {
	tool := func(status string) Entry {
		return Entry{Kind: KindTool, CallID: "c1", Tool: "bash", ToolStatus: status, Result: status}
	}
	resp := Entry{Kind: KindModel, Message: &model.Message{Role: model.RoleAssistant,
		ToolCalls: []model.ToolCall{{ID: "c1", Name: "bash"}}}}
	for _, tc := range []struct {
		name    string
		calls   []Entry
		starts  int
		inDoubt bool
		result  string // the reusable result, if any
		shown   string // the transcript's tool message, if any
	}{
		{"started, no result", []Entry{tool(ToolStarted)}, 1, true, "", ""},
		{"started, answered", []Entry{tool(ToolStarted), tool(ToolOK)}, 0, false, ToolOK, ToolOK},
		{"reported in doubt", []Entry{tool(ToolStarted), tool(ToolInDoubt)}, 0, false, ToolInDoubt, ToolInDoubt},
		{"allowed again, cut again", []Entry{tool(ToolStarted), tool(ToolStarted)}, 2, true, "", ""},
		{"allowed again, answered", []Entry{tool(ToolStarted), tool(ToolStarted), tool(ToolOK)}, 0, false, ToolOK, ToolOK},
		{"start not stored", []Entry{tool(ToolStarted), tool(ToolNotRun)}, 0, false, "", ToolNotRun},
		{"no start", []Entry{tool(ToolOK)}, 0, false, ToolOK, ToolOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := append([]Entry{{Kind: KindStart}, resp}, tc.calls...)
			rp := NewReplay(entries)
			starts, in := rp.InDoubt(0, "c1")
			if in != tc.inDoubt || starts != tc.starts {
				t.Errorf("InDoubt = %d, %v; want %d, %v", starts, in, tc.starts, tc.inDoubt)
			}
			e, ok := rp.ToolResult(0, "c1")
			if (tc.result != "") != ok || (ok && e.ToolStatus != tc.result) {
				t.Errorf("ToolResult = %s, %v; want %q", e.ToolStatus, ok, tc.result)
			}
			tr := BuildTranscript("r", "t", entries)
			var shown []string
			for _, m := range tr.Messages {
				if m.Role == model.RoleTool {
					shown = append(shown, m.Content)
				}
			}
			if want := tc.shown; (want == "" && len(shown) != 0) || (want != "" && (len(shown) != 1 || shown[0] != want)) {
				t.Errorf("transcript shows %q, want %q", shown, want)
			}
			if want := map[bool]int{true: 1}[tc.result == ToolInDoubt]; tr.InDoubt != want {
				t.Errorf("transcript counts %d in doubt, want %d", tr.InDoubt, want)
			}
		})
	}
}
