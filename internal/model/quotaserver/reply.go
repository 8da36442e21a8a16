package quotaserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// AgentTool is the tool a "fanout N" task calls.
const AgentTool = "agent"

// DefaultReply is the answer a server gives unless Config.Respond is set.
// It depends on the request alone, so a fan-out runs the same every time:
//
//  1. If the conversation holds tool results, it answers "collected K
//     results, D done": K results, D of which start with "done:".
//  2. Else, if the first user message (the task) is "fanout N" with N > 0
//     and the tool "agent" is offered, it calls "agent" N times with ids
//     call_1..call_N and arguments {"name":"h<i>","task":"leaf <i>"}.
//  3. Else it answers "done: <the last user message>".
func DefaultReply(req Request) Reply {
	var task, last string
	seenUser := false
	results, done := 0, 0
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			if !seenUser {
				task, seenUser = m.Content, true
			}
			last = m.Content
		case "tool":
			results++
			if strings.HasPrefix(strings.TrimSpace(m.Content), "done:") {
				done++
			}
		}
	}
	if results > 0 {
		return Reply{Text: fmt.Sprintf("collected %d results, %d done", results, done)}
	}
	if n, ok := fanout(task); ok && slices.Contains(req.Tools, AgentTool) {
		calls := make([]ToolCall, n)
		for i := range calls {
			args, _ := json.Marshal(struct {
				Name string `json:"name"`
				Task string `json:"task"`
			}{fmt.Sprintf("h%d", i+1), fmt.Sprintf("leaf %d", i+1)})
			calls[i] = ToolCall{ID: fmt.Sprintf("call_%d", i+1), Name: AgentTool, Arguments: string(args)}
		}
		return Reply{ToolCalls: calls}
	}
	return Reply{Text: "done: " + strings.TrimSpace(last)}
}

// fanout parses "fanout N" with N > 0.
func fanout(task string) (int, bool) {
	f := strings.Fields(task)
	if len(f) != 2 || f[0] != "fanout" {
		return 0, false
	}
	n, err := strconv.Atoi(f[1])
	return n, err == nil && n > 0
}
