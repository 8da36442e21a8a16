package anthropic_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/anthropic"
	"github.com/formica-run/formica/internal/model/modeltest"
)

func TestConformance(t *testing.T) {
	modeltest.Run(t, harness)
}

// harness speaks the Messages wire format as api.anthropic.com does.
var harness = modeltest.Harness{
	Path: "/v1/messages",
	New: func(serverURL string, o modeltest.Options) (model.Model, error) {
		if o.BaseURL == "" {
			o.BaseURL = serverURL
		}
		return anthropic.New(o)
	},
	EncodeStream:      encodeStream,
	EncodeStreamError: encodeStreamError,
	EncodeReply:       encodeReply,
	EncodeError:       encodeError,
	DecodeRequest:     decodeRequest,
	Credential:        func(h http.Header) string { return h.Get("X-Api-Key") },
	TruncatedStop:     "max_tokens",
	// The SDK adds /v1/messages itself: a base URL ending in /v1 doubles it.
	WrongBaseURL: func(serverURL string) string { return serverURL + "/v1" },
	Reasoning:    true,
}

// encodeStream writes a message as Anthropic streams it: message_start
// with the input usage, each content block's start, deltas (text, thinking
// then its signature, tool input as partial JSON) and stop, a ping, then
// message_delta with the stop reason and output usage, and message_stop.
func encodeStream(r modeltest.Reply, _ modeltest.Received) ([]modeltest.Event, error) {
	var events []modeltest.Event
	var failed error
	add := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil && failed == nil {
			failed = err
		}
		events = append(events, modeltest.Event{Name: name, Data: string(b)})
	}
	add("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
		"model": "claude-sonnet-4-5-20250929", "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                r.Usage.InputTokens - r.Usage.CacheReadTokens - r.Usage.CacheWriteTokens,
			"cache_creation_input_tokens": r.Usage.CacheWriteTokens, "cache_read_input_tokens": r.Usage.CacheReadTokens,
			"output_tokens": 1, "service_tier": "standard",
		},
	}})
	index := 0
	block := func(start map[string]any, deltas ...map[string]any) {
		add("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": start})
		if index == 0 {
			add("ping", map[string]any{"type": "ping"})
		}
		for _, d := range deltas {
			add("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
		}
		add("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for _, th := range r.Reasoning {
		if th.Redacted != "" {
			block(map[string]any{"type": "redacted_thinking", "data": th.Redacted})
			continue
		}
		var deltas []map[string]any
		for _, p := range modeltest.Split(th.Text) {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": p})
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": th.Signature})
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas...)
	}
	if r.Text != "" {
		var deltas []map[string]any
		for _, p := range modeltest.Split(r.Text) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": p})
		}
		block(map[string]any{"type": "text", "text": ""}, deltas...)
	}
	for _, tc := range r.ToolCalls {
		if !json.Valid([]byte(tc.Arguments)) {
			return nil, fmt.Errorf("tool_use input must be JSON, got %q", tc.Arguments)
		}
		deltas := []map[string]any{{"type": "input_json_delta", "partial_json": ""}}
		for _, p := range modeltest.Split(tc.Arguments) {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": p})
		}
		block(map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}, deltas...)
	}
	add("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(r), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": r.Usage.OutputTokens}})
	add("message_stop", map[string]any{"type": "message_stop"})
	return events, failed
}

// encodeStreamError is the event Anthropic sends when it fails mid-stream.
func encodeStreamError(message string) modeltest.Event {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": message}})
	return modeltest.Event{Name: "error", Data: string(b)}
}

func stopReason(r modeltest.Reply) string {
	switch {
	case r.StopReason != "":
		return r.StopReason
	case len(r.ToolCalls) > 0:
		return "tool_use"
	}
	return "end_turn"
}

// encodeReply writes a message the way Anthropic does.
func encodeReply(r modeltest.Reply) ([]byte, error) {
	content := []any{}
	for _, th := range r.Reasoning {
		if th.Redacted != "" {
			content = append(content, map[string]any{"type": "redacted_thinking", "data": th.Redacted})
		} else {
			content = append(content, map[string]any{"type": "thinking", "thinking": th.Text, "signature": th.Signature})
		}
	}
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for _, tc := range r.ToolCalls {
		if !json.Valid([]byte(tc.Arguments)) {
			return nil, fmt.Errorf("tool_use input must be JSON, got %q", tc.Arguments)
		}
		content = append(content, map[string]any{
			"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": json.RawMessage(tc.Arguments),
		})
	}
	return json.Marshal(map[string]any{
		"id":            "msg_01XFDUDYJgAACzvnptvVoYEL",
		"type":          "message",
		"role":          "assistant",
		"model":         "claude-sonnet-4-5-20250929",
		"content":       content,
		"stop_reason":   stopReason(r),
		"stop_sequence": nil,
		"usage": map[string]any{
			// The API's input_tokens leaves the cached tokens out.
			"input_tokens":                r.Usage.InputTokens - r.Usage.CacheReadTokens - r.Usage.CacheWriteTokens,
			"cache_creation_input_tokens": r.Usage.CacheWriteTokens,
			"cache_read_input_tokens":     r.Usage.CacheReadTokens,
			"output_tokens":               r.Usage.OutputTokens,
			"service_tier":                "standard",
		},
	})
}

func encodeError(status int, message string) []byte {
	typ := map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
		500: "api_error", 529: "overloaded_error",
	}[status]
	if typ == "" {
		typ = "api_error"
	}
	b, _ := json.Marshal(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": message},
		"request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
	})
	return b
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

// decodeRequest reads a Messages request into the neutral view: tool_result
// blocks become one tool message each, the rest of a user turn a user message.
func decodeRequest(body []byte) (modeltest.Received, error) {
	var req struct {
		Model     string          `json:"model"`
		MaxTokens int64           `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools *[]struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		ToolChoice *struct {
			Type                   string `json:"type"`
			DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
		} `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return modeltest.Received{}, err
	}
	got := modeltest.Received{Model: req.Model, MaxTokens: req.MaxTokens}
	if err := json.Unmarshal(body, &got.Params); err != nil {
		return got, err
	}
	for _, k := range []string{"model", "max_tokens", "system", "messages", "tools", "tool_choice"} {
		delete(got.Params, k)
	}
	system, err := blocks(req.System)
	if err != nil {
		return got, fmt.Errorf("system: %w", err)
	}
	var texts []string
	for _, b := range system {
		texts = append(texts, b.Text)
	}
	got.System = strings.Join(texts, "\n\n")
	for i, m := range req.Messages {
		bs, err := blocks(m.Content)
		if err != nil {
			return got, fmt.Errorf("message %d: %w", i, err)
		}
		msgs, err := neutral(m.Role, bs)
		if err != nil {
			return got, fmt.Errorf("message %d: %w", i, err)
		}
		got.Messages = append(got.Messages, msgs...)
	}
	if req.Tools != nil {
		got.Tools = []model.ToolSchema{}
		for _, tl := range *req.Tools {
			got.Tools = append(got.Tools, model.ToolSchema{Name: tl.Name, Description: tl.Description, Parameters: tl.InputSchema})
		}
	}
	if tc := req.ToolChoice; tc != nil && tc.DisableParallelToolUse != nil {
		parallel := !*tc.DisableParallelToolUse
		got.ParallelToolCalls = &parallel
	}
	return got, nil
}

// blocks reads content that is a string (shorthand for one text block) or a list of blocks.
func blocks(raw json.RawMessage) ([]wireBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []wireBlock{{Type: "text", Text: s}}, nil
	}
	var bs []wireBlock
	err := json.Unmarshal(raw, &bs)
	return bs, err
}

func neutral(role string, bs []wireBlock) ([]model.Message, error) {
	switch role {
	case "assistant":
		msg := model.Message{Role: model.RoleAssistant}
		for _, b := range bs {
			switch b.Type {
			case "text":
				msg.Content += b.Text
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
			case "thinking":
				if msg.Content != "" || len(msg.ToolCalls) > 0 {
					return nil, fmt.Errorf("thinking block after text or tool_use")
				}
				msg.Reasoning = append(msg.Reasoning, model.Reasoning{Text: b.Thinking, Signature: b.Signature})
			case "redacted_thinking":
				msg.Reasoning = append(msg.Reasoning, model.Reasoning{Redacted: b.Data})
			default:
				return nil, fmt.Errorf("assistant block type %q", b.Type)
			}
		}
		return []model.Message{msg}, nil
	case "user":
		var out []model.Message
		for _, b := range bs {
			switch b.Type {
			case "text":
				out = append(out, model.Message{Role: model.RoleUser, Content: b.Text})
			case "tool_result":
				inner, err := blocks(b.Content)
				if err != nil {
					return nil, err
				}
				msg := model.Message{Role: model.RoleTool, ToolCallID: b.ToolUseID}
				for _, ib := range inner {
					msg.Content += ib.Text
				}
				out = append(out, msg)
			default:
				return nil, fmt.Errorf("user block type %q", b.Type)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("role %q", role)
}
