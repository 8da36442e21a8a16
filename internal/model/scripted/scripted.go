// Package scripted replays recorded model responses, for tests of everything
// above the model (runner, limits, the cluster) without a provider.
//
// A script is YAML or JSON:
//
//	responses:
//	  - when: "refactor"          # optional: only for conversations whose first
//	                              # user message contains this text
//	    text: "final answer"
//	    tool_calls:
//	      - id: c1                # optional: default call_<k>_<i>, i from 1
//	        name: agent
//	        arguments: {name: a, task: "do a"}   # a mapping becomes JSON;
//	                                              # a string is kept raw
//	    usage: {input_tokens: 10, output_tokens: 3}   # also cache_read_tokens,
//	                                                   # cache_write_tokens
//	  - error: "provider exploded"               # Generate returns this error
//
// Replay is stateless, so concurrent threads of one run replay correctly: a
// request's candidates are the responses, in file order, whose `when` is
// empty or occurs in the conversation's first user message, and the answer is
// candidates[k], k being the number of assistant messages already in the
// request. A request past the last candidate fails with ErrExhausted.
package scripted

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/formica-run/formica/internal/model"
)

// Model replays a script. It is immutable after loading and safe for
// concurrent use.
type Model struct {
	name      string
	responses []response
}

// Load reads the script at path; errors name the path.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return parse(data, path)
}

// Parse reads a script from data; errors name it "scripted".
func Parse(data []byte) (*Model, error) { return parse(data, "scripted") }

func parse(data []byte, name string) (*Model, error) {
	rs, err := decode(data, name)
	if err != nil {
		return nil, err
	}
	return &Model{name: name, responses: rs}, nil
}

// Generate returns the scripted response for req; see the package documentation.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, fmt.Errorf("scripted: %w", err)
	}
	first := ""
	k := 0
	for _, msg := range req.Messages {
		switch {
		case msg.Role == model.RoleUser && first == "":
			first = msg.Content
		case msg.Role == model.RoleAssistant:
			k++
		}
	}
	seen := 0
	for _, r := range m.responses {
		if r.When != "" && !strings.Contains(first, r.When) {
			continue
		}
		if seen < k {
			seen++
			continue
		}
		return r.answer(k)
	}
	return model.Response{}, fmt.Errorf("%w: %s: k=%d assistant messages, but only %d responses match the conversation starting %q",
		ErrExhausted, m.name, k, seen, excerpt(first))
}

func (r response) answer(k int) (model.Response, error) {
	if r.Error != "" {
		return model.Response{}, &Error{Text: r.Error}
	}
	out := model.Response{Text: r.Text, Usage: r.Usage.model(), StopReason: "stop"}
	for j, c := range r.ToolCalls {
		id := cmp.Or(c.ID, fmt.Sprintf("call_%d_%d", k, j+1))
		out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: id, Name: c.Name, Arguments: c.json})
	}
	if len(out.ToolCalls) > 0 {
		out.StopReason = "tool_calls"
	}
	return out, nil
}

// excerpt shortens a task for an error message.
func excerpt(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 60 {
		return string(r[:60]) + "..."
	}
	return s
}
