package journal

import (
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
)

// Transcript is one thread's life read back from its journal: who it is,
// how it ended, the conversation exactly as its model saw it, and every
// entry in order (model responses, tool calls with arguments and results,
// approvals, spawns with the child's id, refusals, handoffs, elisions and
// summaries).
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
	// InDoubt counts the calls found in doubt: started (at most once),
	// cut by a failure before their result, and not run again (their
	// entries' tool_status is in_doubt).
	InDoubt int `json:"in_doubt,omitempty"`
	// Usage is the thread's own model calls, counted once.
	Usage      model.Usage `json:"usage"`
	StartedAt  time.Time   `json:"started_at,omitzero"`
	FinishedAt time.Time   `json:"finished_at,omitzero"`
	// Messages is the conversation: system prompt, task, then each
	// assistant message followed by the results of its tool calls in call
	// order, as the last model call received them: with old results
	// elided and its oldest part summarized where the journal says so.
	Messages []model.Message `json:"messages"`
	// Entries is the journal itself, in the order it was written, with
	// each placement where the first entry written under it is.
	Entries []Entry `json:"entries"`
}

// BuildTranscript reads a thread's trusted entries (Trusted) into its
// transcript. Work done twice (a turn redone after a crash) appears once,
// as the thread used it: the first entry of each turn and call wins.
func BuildTranscript(run, thread string, entries []Entry) Transcript {
	t := Transcript{RunID: run, ThreadID: thread, Status: event.Running, Messages: []model.Message{}, Entries: []Entry{}}
	seenTurn := map[int]bool{}
	compactions := map[int][]Entry{}
	// Each call's result, kept as a replay keeps it (NewReplay).
	results := NewReplay(entries).tools
	// The conversation is laid out once every result is known: a turn
	// redone after a crash journals its results after entries (an end,
	// a placement) of the execution that died.
	var steps []Entry
	started := false
	placements := map[string]bool{}
	for _, e := range entries {
		if p := e.Proof; p != nil && !placements[p.Digest] {
			placements[p.Digest] = true
			t.Worker = p.Worker
			t.Attempts++
			t.Entries = append(t.Entries, Entry{Kind: KindPlacement, Time: e.Time, Turn: e.Turn, Worker: p.Worker,
				Attempt: p.Attempt, Placement: p.Digest, ThreadID: e.ThreadID, Seq: e.Seq})
		}
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
			steps = append(steps, e)
		case KindModel:
			if seenTurn[e.Turn] || e.Message == nil {
				continue
			}
			seenTurn[e.Turn] = true
			t.Usage = t.Usage.Add(e.Usage)
			steps = append(steps, e)
		case KindCorrection, KindHandoff:
			steps = append(steps, e)
		case KindElision, KindSummary:
			before := len(compactions[e.Turn])
			if compactions[e.Turn] = addCompaction(compactions[e.Turn], e); len(compactions[e.Turn]) > before {
				t.Usage = t.Usage.Add(e.Usage)
				steps = append(steps, e)
			}
		case KindPlacement: // a coordinator's, in a journal written before proofs
			if e.Placement == "" || !placements[e.Placement] {
				placements[e.Placement] = true
				t.Worker = e.Worker
				t.Attempts++
			}
		case KindEnd:
			t.Status, t.Output, t.Error, t.FinishedAt = e.Status, e.Output, e.Error, e.Time
		}
	}
	for _, r := range results {
		if r.ToolStatus == ToolInDoubt {
			t.InDoubt++
		}
	}
	for _, e := range steps {
		switch e.Kind {
		case KindStart:
			t.Messages = append(t.Messages,
				model.Message{Role: model.RoleSystem, Content: e.System},
				model.Message{Role: model.RoleUser, Content: e.Task})
		case KindModel:
			t.Messages = append(t.Messages, *e.Message)
			for _, c := range e.Message.ToolCalls {
				r, ok := results[CallKey(e.Turn, c.ID)]
				if !ok || r.ToolStatus == ToolStarted {
					continue // the call never finished
				}
				t.Messages = append(t.Messages, model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: r.Result})
			}
		case KindCorrection:
			t.Messages = append(t.Messages, model.Message{Role: model.RoleUser, Content: e.Content})
		case KindHandoff:
			if e.System != "" && len(t.Messages) > 0 {
				t.Messages[0].Content = e.System
			}
		case KindElision, KindSummary:
			t.Messages = Apply(t.Messages, e)
		}
	}
	return t
}
