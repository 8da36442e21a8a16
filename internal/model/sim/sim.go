// Package sim is Formica's built-in deterministic model. It needs no network
// or credentials, so the whole system (fan-out, nesting, limits, schemas) can
// be run, demonstrated and tested offline. It decides from the request alone,
// keeping no state between calls.
//
// Given the content of the last user message (the task):
//
//  1. On a thread's first turn (no assistant message in the conversation yet),
//     if the request offers a tool named "agent" and the task holds a list
//     ("- " items at the least indentation), it calls `agent` once per item,
//     in order, in one response:
//     ids call_1, call_2, ...; arguments {"name": <slug>, "task": <item task>}.
//     An item's task is its text followed by its deeper-indented lines,
//     de-indented, so nested lists make nested helper trees and a single item
//     makes a chain. A later user message (such as the runner's request to
//     correct an answer that failed its schema, which may quote "- at ..."
//     lines) is never split: it is answered as in 3.
//  2. If the conversation ends with tool results answering its calls, it
//     answers with one line per call, in call order: "<name>: <result>", where
//     <name> is the call's "name" argument (or the tool name) and a multi-line
//     result has its following lines indented by two spaces.
//  3. Otherwise it answers "done: <first non-blank line of the task>".
//
// When a system message (or the task) holds the line SchemaMarker followed by
// a JSON Schema, the answer of steps 2 and 3 is instead the smallest JSON value
// it can build for that schema, its strings filled with the plain answer; see
// fill for what is understood.
//
// Model arg "latency_ms" delays every call that long, returning early with
// the context's error when it ends. Usage counts whitespace-separated words:
// input is the words of all messages and tool schemas, output those of the
// response; each is at least 1.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// AgentTool is the tool name the model delegates through.
const AgentTool = "agent"

// SchemaMarker introduces a JSON Schema the answer must satisfy. The runner
// writes this line, then the schema, into the system prompt of an agent with
// an output schema.
const SchemaMarker = "Respond with only JSON matching this JSON Schema:"

// Model is the sim model; the zero value is ready and safe for concurrent use.
type Model struct{}

// New returns the sim model.
func New() *Model { return &Model{} }

// Generate answers req as described in the package documentation.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if err := wait(ctx, req.Args); err != nil {
		return model.Response{}, err
	}
	resp := decide(req)
	resp.Usage = model.Usage{InputTokens: inputWords(req), OutputTokens: outputWords(resp)}
	return resp, nil
}

// wait sleeps for the latency_ms arg, or until ctx ends.
func wait(ctx context.Context, args model.Args) error {
	ms, _ := args.Float("latency_ms")
	if ms <= 0 {
		return ctxErr(ctx)
	}
	t := time.NewTimer(time.Duration(ms * float64(time.Millisecond)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return ctxErr(ctx)
}

// ctxErr is ctx's error, with its cause attached when one was given.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("sim: %w: %w", err, cause)
	}
	return fmt.Errorf("sim: %w", err)
}

func decide(req model.Request) model.Response {
	msgs := req.Messages
	last := -1
	for i, m := range msgs {
		if m.Role == model.RoleUser {
			last = i
		}
	}
	var task string
	if last >= 0 {
		task = msgs[last].Content
	}
	after := msgs[last+1:]

	answered := slices.ContainsFunc(msgs, func(m model.Message) bool { return m.Role == model.RoleAssistant })
	offered := slices.ContainsFunc(req.Tools, func(t model.ToolSchema) bool { return t.Name == AgentTool })
	if !answered && offered {
		if parts := splitParts(task); len(parts) > 0 {
			return spawn(parts)
		}
	}
	text := leaf(task)
	if combined, ok := combine(after); ok {
		text = combined
	}
	if schema, ok := findSchema(msgs, task); ok {
		text = fill(schema, text)
	}
	return model.Response{Text: text, StopReason: "stop"}
}

func spawn(parts []part) model.Response {
	calls := make([]model.ToolCall, len(parts))
	for i, p := range parts {
		calls[i] = model.ToolCall{
			ID:        fmt.Sprintf("call_%d", i+1),
			Name:      AgentTool,
			Arguments: marshal(agentArgs{Name: p.name, Task: p.task}),
		}
	}
	return model.Response{ToolCalls: calls, StopReason: "tool_calls"}
}

// agentArgs are the arguments of an agent tool call, "name" before "task".
type agentArgs struct {
	Name string `json:"name"`
	Task string `json:"task"`
}

// marshal encodes v without HTML escaping, so tasks read naturally in logs.
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and structs and maps of strings always encode
	return strings.TrimSuffix(b.String(), "\n")
}

// leaf is the answer to a task it does not split.
func leaf(task string) string {
	for _, l := range strings.Split(task, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return "done: " + l
		}
	}
	return "done"
}

// combine answers the tool results that end the conversation, if it does:
// one "<name>: <result>" line per call of the assistant message they answer.
func combine(after []model.Message) (string, bool) {
	start := len(after)
	for start > 0 && after[start-1].Role == model.RoleTool {
		start--
	}
	if start == len(after) || start == 0 || len(after[start-1].ToolCalls) == 0 {
		return "", false
	}
	results := after[start:]
	byID := map[string]string{}
	for _, r := range results {
		byID[r.ToolCallID] = r.Content
	}
	calls := after[start-1].ToolCalls
	lines := make([]string, len(calls))
	for i, c := range calls {
		result, ok := byID[c.ID]
		if !ok && c.ID == "" && i < len(results) {
			result, ok = results[i].Content, true
		}
		if !ok {
			result = "(no result)"
		}
		lines[i] = strings.TrimRight(callName(c)+": "+strings.ReplaceAll(result, "\n", "\n  "), " ")
	}
	return strings.Join(lines, "\n"), true
}

// callName is the "name" argument of a call, or else its tool name.
func callName(c model.ToolCall) string {
	var args struct {
		Name string `json:"name"`
	}
	if json.Unmarshal([]byte(c.Arguments), &args) == nil && args.Name != "" {
		return args.Name
	}
	return c.Name
}

func inputWords(req model.Request) int64 {
	n := 0
	for _, m := range req.Messages {
		n += words(m.Content)
		for _, c := range m.ToolCalls {
			n += words(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += words(t.Description) + words(t.Parameters)
	}
	return int64(max(n, 1))
}

func outputWords(resp model.Response) int64 {
	n := words(resp.Text)
	for _, c := range resp.ToolCalls {
		n += words(c.Arguments)
	}
	return int64(max(n, 1))
}

// words counts runs of non-space bytes, as len(strings.Fields(s)) would for
// ASCII text, without allocating: usage is counted on every call, over the
// whole request, and the bench's spawn figures include it.
func words[T ~string | ~[]byte](s T) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		space := s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}
