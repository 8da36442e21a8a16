package openai_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/modeltest"
	"github.com/formica-run/formica/internal/model/openai"
)

func TestConformance(t *testing.T) {
	modeltest.Run(t, harness)
}

// harness speaks the Chat Completions wire format as api.openai.com does.
var harness = modeltest.Harness{
	Path: "/v1/chat/completions",
	New: func(serverURL string, o modeltest.Options) (model.Model, error) {
		if o.BaseURL == "" {
			o.BaseURL = serverURL + "/v1"
		}
		return openai.New(o)
	},
	EncodeStream:      encodeStream,
	EncodeStreamError: encodeStreamError,
	EncodeReply:       encodeReply,
	EncodeError:       encodeError,
	DecodeRequest:     decodeRequest,
	Credential: func(h http.Header) string {
		return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
	},
	TruncatedStop: "length",
	// Ollama, vLLM and LM Studio serve under /v1; a base URL without it
	// gets their 404.
	WrongBaseURL: func(serverURL string) string { return serverURL },
}

type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chunkHead is the part every chunk of one stream repeats.
var chunkHead = map[string]any{
	"id":                 "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
	"object":             "chat.completion.chunk",
	"created":            1741570283,
	"model":              "gpt-4o-2024-08-06",
	"service_tier":       "default",
	"system_fingerprint": "fp_fc9f1d7035",
}

// encodeStream writes a completion as OpenAI streams it: a first chunk
// with the role, the content in pieces, each tool call's id and name then
// its arguments in pieces, a last chunk with the finish reason and, only
// when stream_options.include_usage asks for it, a usage chunk with no
// choices; "usage": null in every other chunk then; and [DONE].
func encodeStream(r modeltest.Reply, req modeltest.Received) ([]modeltest.Event, error) {
	opts, _ := req.Params["stream_options"].(map[string]any)
	withUsage := opts["include_usage"] == true
	var events []modeltest.Event
	chunk := func(delta map[string]any, finish any) error {
		c := maps.Clone(chunkHead)
		c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
		if withUsage {
			c["usage"] = nil
		}
		b, err := json.Marshal(c)
		events = append(events, modeltest.Event{Data: string(b)})
		return err
	}
	if err := chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil); err != nil {
		return nil, err
	}
	for _, p := range modeltest.Split(r.Text) {
		if err := chunk(map[string]any{"content": p}, nil); err != nil {
			return nil, err
		}
	}
	for i, tc := range r.ToolCalls {
		first := map[string]any{"index": i, "id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": ""}}
		if err := chunk(map[string]any{"tool_calls": []any{first}}, nil); err != nil {
			return nil, err
		}
		for _, p := range modeltest.Split(tc.Arguments) {
			piece := map[string]any{"index": i, "function": map[string]any{"arguments": p}}
			if err := chunk(map[string]any{"tool_calls": []any{piece}}, nil); err != nil {
				return nil, err
			}
		}
	}
	if err := chunk(map[string]any{}, finishReason(r)); err != nil {
		return nil, err
	}
	if withUsage {
		c := maps.Clone(chunkHead)
		c["choices"] = []any{}
		c["usage"] = wireUsage(r.Usage)
		b, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		events = append(events, modeltest.Event{Data: string(b)})
	}
	return append(events, modeltest.Event{Data: "[DONE]"}), nil
}

// encodeStreamError is the event OpenAI sends when it fails mid-stream.
func encodeStreamError(message string) modeltest.Event {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": "server_error", "param": nil, "code": nil,
	}})
	return modeltest.Event{Data: string(b)}
}

func finishReason(r modeltest.Reply) string {
	switch {
	case r.StopReason != "":
		return r.StopReason
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func wireUsage(u model.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":             u.InputTokens,
		"completion_tokens":         u.OutputTokens,
		"total_tokens":              u.InputTokens + u.OutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheReadTokens, "cache_write_tokens": u.CacheWriteTokens, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

// encodeReply writes a completion the way OpenAI does, down to the nulls.
func encodeReply(r modeltest.Reply) ([]byte, error) {
	var content *string
	if r.Text != "" || len(r.ToolCalls) == 0 {
		content = &r.Text
	}
	msg := map[string]any{"role": "assistant", "content": content, "refusal": nil, "annotations": []any{}}
	if len(r.ToolCalls) > 0 {
		calls := make([]wireCall, len(r.ToolCalls))
		for i, tc := range r.ToolCalls {
			calls[i].ID, calls[i].Type = tc.ID, "function"
			calls[i].Function.Name, calls[i].Function.Arguments = tc.Name, tc.Arguments
		}
		msg["tool_calls"] = calls
	}
	return json.Marshal(map[string]any{
		"id":      "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
		"object":  "chat.completion",
		"created": 1741570283,
		"model":   "gpt-4o-2024-08-06",
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": finishReason(r),
		}},
		"usage":              wireUsage(r.Usage),
		"service_tier":       "default",
		"system_fingerprint": "fp_fc9f1d7035",
	})
}

func encodeError(status int, message string) []byte {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == 401:
		code = "invalid_api_key"
	case status == 429:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": code,
	}})
	return b
}

// decodeRequest reads a Chat Completions request into the neutral view.
func decodeRequest(body []byte) (modeltest.Received, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  []wireCall      `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Tools *[]struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		ParallelToolCalls   *bool `json:"parallel_tool_calls"`
		MaxTokens           int64 `json:"max_tokens"`
		MaxCompletionTokens int64 `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return modeltest.Received{}, err
	}
	var params map[string]any
	if err := json.Unmarshal(body, &params); err != nil {
		return modeltest.Received{}, err
	}
	for _, k := range []string{"model", "messages", "tools", "parallel_tool_calls", "max_tokens", "max_completion_tokens"} {
		delete(params, k)
	}
	got := modeltest.Received{Model: req.Model, ParallelToolCalls: req.ParallelToolCalls, Params: maps.Clone(params)}
	got.MaxTokens = max(req.MaxTokens, req.MaxCompletionTokens)
	var system []string
	for i, m := range req.Messages {
		var text string
		if len(m.Content) > 0 && string(m.Content) != "null" {
			if err := json.Unmarshal(m.Content, &text); err != nil {
				return got, fmt.Errorf("message %d: content is not a string: %s", i, m.Content)
			}
		}
		msg := model.Message{Role: model.Role(m.Role), Content: text, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if msg.Role == model.RoleSystem {
			system = append(system, text)
			continue
		}
		got.Messages = append(got.Messages, msg)
	}
	got.System = strings.Join(system, "\n\n")
	if req.Tools == nil {
		return got, nil
	}
	got.Tools = []model.ToolSchema{}
	for _, tl := range *req.Tools {
		if tl.Type != "function" {
			return got, fmt.Errorf("tool type %q, want function", tl.Type)
		}
		got.Tools = append(got.Tools, model.ToolSchema{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
	}
	return got, nil
}
