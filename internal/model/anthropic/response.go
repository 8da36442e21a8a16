package anthropic

import (
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/formica-run/formica/internal/model"
)

// response maps a message. Text blocks are concatenated (the API splits text
// around citations, so no separator is added); tool_use blocks become tool
// calls in order, their input kept as the raw JSON text the server sent.
// Thinking and server-tool blocks are not part of the model contract and are
// skipped.
func response(msg *anthropic.Message) (model.Response, error) {
	if msg == nil || !msg.JSON.Content.Valid() {
		return model.Response{}, fmt.Errorf("%s: %w: no content in the response", provider, model.ErrBadResponse)
	}
	u := msg.Usage
	out := model.Response{
		StopReason: string(msg.StopReason),
		Usage: model.Usage{
			// Cached input is still input: counting it keeps usage comparable
			// with OpenAI's prompt_tokens, which include cached tokens.
			InputTokens:  u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
			OutputTokens: u.OutputTokens,
		},
	}
	var text strings.Builder
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return model.Response{}, fmt.Errorf("%s: %w: tool_use block %d has no id or name", provider, model.ErrBadResponse, i)
			}
			args := string(b.Input)
			if args == "" || args == "null" {
				args = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Text = text.String()
	return out, nil
}
