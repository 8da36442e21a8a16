package quotaserver

import (
	"encoding/json"
	"net/http"
	"strconv"
)

type openaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (a *answer) openaiUsage() openaiUsage {
	return openaiUsage{a.inputTokens, a.outputTokens, a.inputTokens + a.outputTokens}
}

type openaiFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type openaiToolCall struct {
	Index    *int           `json:"index,omitempty"`
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function openaiFunction `json:"function"`
}

func openaiPlain(a *answer) []byte {
	type message struct {
		Role      string           `json:"role"`
		Content   *string          `json:"content"`
		Refusal   *string          `json:"refusal"`
		ToolCalls []openaiToolCall `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int             `json:"index"`
		Message      message         `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
	}
	msg := message{Role: "assistant"}
	if text := a.text(); text != "" || len(a.calls) == 0 {
		msg.Content = &text
	}
	for _, c := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, openaiToolCall{ID: c.ID, Type: "function",
			Function: openaiFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	return mustJSON(struct {
		ID      string      `json:"id"`
		Object  string      `json:"object"`
		Created int64       `json:"created"`
		Model   string      `json:"model"`
		Choices []choice    `json:"choices"`
		Usage   openaiUsage `json:"usage"`
	}{a.id, "chat.completion", a.created, a.model,
		[]choice{{Message: msg, Logprobs: null, FinishReason: a.reason("tool_calls", "stop")}}, a.openaiUsage()})
}

var null = json.RawMessage("null")

type openaiDelta struct {
	Role      string           `json:"role,omitempty"`
	Content   *string          `json:"content,omitempty"`
	ToolCalls []openaiToolCall `json:"tool_calls,omitempty"`
}

type openaiChunkChoice struct {
	Index        int             `json:"index"`
	Delta        openaiDelta     `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type openaiChunk struct {
	ID      string              `json:"id"`
	Object  string              `json:"object"`
	Created int64               `json:"created"`
	Model   string              `json:"model"`
	Choices []openaiChunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the client asked for
	// usage, and absent when it did not.
	Usage json.RawMessage `json:"usage,omitempty"`
}

// frames streams as Chat Completions does: a first chunk with the role, a
// chunk per piece (a tool call opens with its index, id and name, then its
// arguments follow in fragments under the same index), a chunk with the
// finish reason, a usage chunk with no choices if asked for, then [DONE].
func openaiFrames(a *answer) []frame {
	chunk := func(d openaiDelta, finish *string) []byte {
		c := openaiChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			Choices: []openaiChunkChoice{{Delta: d, Logprobs: null, FinishReason: finish}}}
		if a.includeUsage {
			c.Usage = null
		}
		return data(mustJSON(c))
	}
	empty := ""
	out := []frame{{0, chunk(openaiDelta{Role: "assistant", Content: &empty}, nil)}}
	for _, p := range a.pieces {
		var d openaiDelta
		switch p.kind {
		case textPiece:
			d.Content = &p.text
		case callStart:
			c := a.calls[p.call]
			d.ToolCalls = []openaiToolCall{{Index: &p.call, ID: c.ID, Type: "function",
				Function: openaiFunction{Name: c.Name}}}
		case callArgs:
			d.ToolCalls = []openaiToolCall{{Index: &p.call, Function: openaiFunction{Arguments: p.text}}}
		}
		out = append(out, frame{p.at, chunk(d, nil)})
	}
	finish := a.reason("tool_calls", "stop")
	out = append(out, frame{a.end, chunk(openaiDelta{}, &finish)})
	if a.includeUsage {
		out = append(out, frame{a.end, data(mustJSON(openaiChunk{ID: a.id, Object: "chat.completion.chunk",
			Created: a.created, Model: a.model, Choices: []openaiChunkChoice{},
			Usage: mustJSON(a.openaiUsage())}))})
	}
	return append(out, frame{a.end, data([]byte("[DONE]"))})
}

func data(b []byte) []byte {
	return append(append([]byte("data: "), b...), "\n\n"...)
}

func openaiErrorBody(status int, msg string) []byte {
	typ, code := "invalid_request_error", json.RawMessage("null")
	switch status {
	case http.StatusTooManyRequests:
		typ, code = "rate_limit_error", json.RawMessage(`"rate_limit_exceeded"`)
	case http.StatusNotFound:
		code = json.RawMessage(`"not_found"`)
	}
	type body struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    json.RawMessage `json:"code"`
	}
	return mustJSON(struct {
		Error body `json:"error"`
	}{body{msg, typ, null, code}})
}

func openaiLimitHeaders(h http.Header, q quota) {
	set := func(kind string, l *limitState) {
		if l == nil {
			return
		}
		h.Set("x-ratelimit-limit-"+kind, strconv.FormatInt(l.limit, 10))
		h.Set("x-ratelimit-remaining-"+kind, strconv.FormatInt(l.remaining, 10))
		h.Set("x-ratelimit-reset-"+kind, ceilMillis(l.reset).String())
	}
	set("requests", q.requests)
	set("tokens", q.tokens)
}
