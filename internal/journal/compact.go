package journal

import (
	"fmt"
	"slices"
	"strings"

	"github.com/formica-run/formica/internal/model"
)

// A thread keeps its requests inside its model's context window by
// compacting its conversation (internal/runner decides when and what):
// an elision replaces old tool results by markers, a summary replaces the
// oldest part of the conversation after the task by one user message. The
// entries say exactly what was done, and Apply does it, so the runner, a
// replay and a transcript all build the same conversation from them.

// Elided is one tool result an elision replaced.
type Elided struct {
	// Index is the result's place in the conversation (0 is the system
	// prompt, 1 the task).
	Index  int    `json:"index" msgpack:"index"`
	CallID string `json:"call_id" msgpack:"call_id"`
	Tool   string `json:"tool" msgpack:"tool"`
	// Bytes is the size of the result it replaced.
	Bytes int `json:"bytes" msgpack:"bytes"`
}

// elisionPrefix starts every marker.
const elisionPrefix = "[result elided to fit the context window: "

// ElisionMarker is the text that replaces the result of tool call callID
// of tool, bytes long: what was removed and how to get it again.
func ElisionMarker(tool, callID string, bytes int) string {
	return fmt.Sprintf("%s%d bytes of %s output (call %s) were removed. If you need them again, call %s again with the same arguments.]",
		elisionPrefix, bytes, tool, callID, tool)
}

// IsElided reports whether a tool result is an elision's marker.
func IsElided(content string) bool { return strings.HasPrefix(content, elisionPrefix) }

// SummaryMessage is the user message that replaces n messages after the
// task with summary.
func SummaryMessage(n int, summary string) model.Message {
	return model.Message{Role: model.RoleUser, Content: fmt.Sprintf(
		"[Summary of the earlier conversation (%d messages were replaced to fit the context window):]\n%s", n, summary)}
}

// Apply does what an elision or summary entry says to msgs and returns
// the conversation after it, in a new slice when anything changed: msgs
// itself is never changed (requests already sent share it). What does not match
// (an index past the end, a message that is not that call's result, too
// few messages to summarize) is left as it is: an entry never breaks a
// conversation, it can only fail to shorten it.
func Apply(msgs []model.Message, e Entry) []model.Message {
	switch e.Kind {
	case KindElision:
		out, cloned := msgs, false
		for _, el := range e.Elided {
			if el.Index < 2 || el.Index >= len(msgs) {
				continue
			}
			m := msgs[el.Index]
			if m.Role != model.RoleTool || m.ToolCallID != el.CallID || IsElided(m.Content) {
				continue
			}
			if !cloned {
				out, cloned = slices.Clone(msgs), true
			}
			out[el.Index].Content = ElisionMarker(el.Tool, el.CallID, el.Bytes)
		}
		return out
	case KindSummary:
		n := e.Summarized
		if n <= 0 || 2+n > len(msgs) {
			return msgs
		}
		out := make([]model.Message, 0, len(msgs)-n+1)
		out = append(out, msgs[:2]...)
		out = append(out, SummaryMessage(n, e.Content))
		return append(out, msgs[2+n:]...)
	}
	return msgs
}
