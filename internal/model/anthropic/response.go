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
// Thinking blocks (with their signatures) and redacted thinking blocks are
// kept as Reasoning, to be sent back with the turn; server-tool blocks are
// skipped.
func response(msg *anthropic.Message) (model.Response, error) {
	if msg == nil || !msg.JSON.Content.Valid() {
		return model.Response{}, fmt.Errorf("%s: %w: no content in the response", provider, model.ErrBadResponse)
	}
	out := model.Response{
		StopReason: string(msg.StopReason),
		Usage:      usage(msg.Usage),
		ID:         msg.ID,
		Model:      string(msg.Model),
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
		case "thinking":
			out.Reasoning = append(out.Reasoning, model.Reasoning{Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			out.Reasoning = append(out.Reasoning, model.Reasoning{Redacted: b.Data})
		}
	}
	out.Text = text.String()
	if msg.StopReason == anthropic.StopReasonMaxTokens && strings.TrimSpace(out.Text) == "" && len(out.ToolCalls) == 0 {
		return model.Response{}, fmt.Errorf("%s: %w (stop_reason max_tokens, no text; raise max_tokens)", provider, model.ErrTruncated)
	}
	return out, nil
}

// usage maps a message's usage. The API's input_tokens leaves out the
// tokens read from and written to the prompt cache; InputTokens counts them
// all (as OpenAI's prompt_tokens do), and CacheReadTokens and
// CacheWriteTokens say which part was cached.
func usage(u anthropic.Usage) model.Usage {
	return model.Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}
