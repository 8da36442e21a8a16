package openai

import (
	"crypto/rand"
	"fmt"

	"github.com/openai/openai-go/v3"

	"github.com/formica-run/formica/internal/model"
)

// response maps the first choice of a completion. A body that decoded but has
// no choice is a bad response, not an empty answer.
func response(c *openai.ChatCompletion) (model.Response, error) {
	if c == nil || len(c.Choices) == 0 {
		return model.Response{}, fmt.Errorf("%s: %w: no choices in the response", provider, model.ErrBadResponse)
	}
	choice := c.Choices[0]
	msg := choice.Message
	out := model.Response{
		Text:       msg.Content,
		StopReason: choice.FinishReason,
		Usage:      usage(c.Usage),
		ID:         c.ID,
		Model:      c.Model,
	}
	if out.Text == "" && msg.Refusal != "" {
		// A refusal is the model's answer; dropping it would leave the run
		// with an empty turn and no explanation.
		out.Text = msg.Refusal
	}
	if choice.FinishReason == "length" && out.Text == "" && len(msg.ToolCalls) == 0 {
		// The token limit ate the whole answer (reasoning models spend it
		// thinking): an empty success would hide that.
		return model.Response{}, fmt.Errorf("%s: %w (finish_reason length, no content; raise max_tokens)", provider, model.ErrTruncated)
	}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return model.Response{}, fmt.Errorf("%s: %w: tool call %d has type %q; only function tools are sent", provider, model.ErrBadResponse, i, tc.Type)
		}
		if tc.Function.Name == "" {
			return model.Response{}, fmt.Errorf("%s: %w: tool call %d has no function name", provider, model.ErrBadResponse, i)
		}
		id := tc.ID
		if id == "" {
			// Some local servers omit ids; the run links results by id, so
			// make one that cannot collide with another turn's.
			id = "call_" + rand.Text()
		}
		out.ToolCalls = append(out.ToolCalls, model.ToolCall{
			ID:        id,
			Name:      tc.Function.Name,
			Arguments: tc.Function.Arguments,
		})
	}
	return out, nil
}

// usage maps a completion's usage. prompt_tokens include the cached
// tokens; cached_tokens (and cache_write_tokens, which some compatible
// servers report) say which part was read from and written to the cache.
func usage(u openai.CompletionUsage) model.Usage {
	return model.Usage{
		InputTokens:      u.PromptTokens,
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  u.PromptTokensDetails.CachedTokens,
		CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
	}
}
