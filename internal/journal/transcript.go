package journal

import (
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
)

// Transcript is one thread's life read back from its journal: who it is,
// how it ended, the conversation exactly as its model saw it, and every
// entry in order (model responses, tool calls with arguments and results,
// approvals, spawns with the child's id, refusals, handoffs).
type Transcript struct {
	RunID    string       `json:"run_id"`
	ThreadID string       `json:"thread_id"`
	ParentID string       `json:"parent_id,omitempty"`
	Name     string       `json:"name"`
	Path     string       `json:"path"`
	Depth    int          `json:"depth"`
	Model    string       `json:"model,omitempty"`
	Status   event.Status `json:"status"`
	Output   string       `json:"output,omitempty"`
	Error    string       `json:"error,omitempty"`
	// Worker is where the thread was placed last.
	Worker string `json:"worker,omitempty"`
	// Attempts counts the thread's placements.
	Attempts int `json:"attempts,omitempty"`
	// Usage is the thread's own model calls, counted once.
	Usage      model.Usage `json:"usage"`
	StartedAt  time.Time   `json:"started_at,omitzero"`
	FinishedAt time.Time   `json:"finished_at,omitzero"`
	// Messages is the conversation: system prompt, task, then each
	// assistant message followed by the results of its tool calls in call
	// order, as the next model call received them.
	Messages []model.Message `json:"messages"`
	// Entries is the journal itself, in the order it was written.
	Entries []Entry `json:"entries"`
}

// BuildTranscript reads a thread's trusted entries (Trusted) into its
// transcript. Work done twice (a turn redone after a crash) appears once,
// as the thread used it: the first entry of each turn and call wins.
func BuildTranscript(run, thread string, entries []Entry) Transcript {
	t := Transcript{RunID: run, ThreadID: thread, Status: event.Running, Messages: []model.Message{}, Entries: []Entry{}}
	seenTurn := map[int]bool{}
	results := map[string]Entry{}
	var pending *model.Message // the last assistant message whose tool results are not placed yet
	pendingTurn := 0
	flush := func() {
		if pending == nil {
			return
		}
		for _, c := range pending.ToolCalls {
			e, ok := results[CallKey(pendingTurn, c.ID)]
			if !ok {
				continue // the call never finished: the conversation ends here
			}
			t.Messages = append(t.Messages, model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: e.Result})
		}
		pending = nil
	}
	started := false
	for _, e := range entries {
		t.Entries = append(t.Entries, e)
		switch e.Kind {
		case KindStart:
			if started {
				continue
			}
			started = true
			if e.Thread != nil {
				t.ParentID, t.Name, t.Path, t.Depth = e.Thread.ParentID, e.Thread.Name, e.Thread.Path, e.Thread.Depth
			}
			t.Model, t.StartedAt = e.Model, e.Time
			t.Messages = append(t.Messages,
				model.Message{Role: model.RoleSystem, Content: e.System},
				model.Message{Role: model.RoleUser, Content: e.Task})
		case KindModel:
			if seenTurn[e.Turn] || e.Message == nil {
				continue
			}
			seenTurn[e.Turn] = true
			flush()
			t.Usage = t.Usage.Add(e.Usage)
			t.Messages = append(t.Messages, *e.Message)
			if len(e.Message.ToolCalls) > 0 {
				msg := *e.Message
				pending, pendingTurn = &msg, e.Turn
			}
		case KindTool:
			k := CallKey(e.Turn, e.CallID)
			if _, ok := results[k]; !ok {
				results[k] = e
			}
		case KindCorrection:
			flush()
			t.Messages = append(t.Messages, model.Message{Role: model.RoleUser, Content: e.Content})
		case KindHandoff:
			flush()
			if e.System != "" && len(t.Messages) > 0 {
				t.Messages[0].Content = e.System
			}
		case KindPlacement:
			t.Worker = e.Worker
			t.Attempts++
		case KindEnd:
			flush()
			t.Status, t.Output, t.Error, t.FinishedAt = e.Status, e.Output, e.Error, e.Time
		}
	}
	flush()
	return t
}
