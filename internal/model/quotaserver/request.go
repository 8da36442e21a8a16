package quotaserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// decode reads a request body of format f into a Request.
func decode(f Format, body []byte) (Request, error) {
	req := Request{Format: f, InputTokens: len(body) / 4}
	err := protocols[f].decode(body, &req)
	return req, err
}

// openaiRequest is the part of a Chat Completions request the server reads.
type openaiRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func decodeOpenAI(body []byte, req *Request) error {
	var r openaiRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("the body is not a Chat Completions request: %v", err)
	}
	if r.Model == "" {
		return errors.New("model is required")
	}
	req.Model, req.Stream = r.Model, r.Stream
	req.includeUsage = r.StreamOptions != nil && r.StreamOptions.IncludeUsage
	for i, m := range r.Messages {
		text, err := joinText(m.Content, "content")
		if err != nil {
			return fmt.Errorf("messages[%d]: %v", i, err)
		}
		msg := Message{Role: m.Role, Content: text, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range r.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	return nil
}

// anthropicRequest is the part of a Messages request the server reads.
type anthropicRequest struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// anthropicBlock is one content block of a Messages request.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func decodeAnthropic(body []byte, req *Request) error {
	var r anthropicRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("the body is not a Messages request: %v", err)
	}
	if r.Model == "" {
		return errors.New("model: Field required")
	}
	req.Model, req.Stream = r.Model, r.Stream
	if sys, err := joinText(r.System, "system"); err != nil {
		return err
	} else if sys != "" {
		req.Messages = append(req.Messages, Message{Role: "system", Content: sys})
	}
	for i, m := range r.Messages {
		msgs, err := anthropicTurn(m.Role, m.Content)
		if err != nil {
			return fmt.Errorf("messages.%d: %v", i, err)
		}
		req.Messages = append(req.Messages, msgs...)
	}
	for _, t := range r.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	return nil
}

// anthropicTurn maps one message to Chat Completions-like messages: its
// tool_result blocks become "tool" messages, ahead of the message's text.
func anthropicTurn(role string, content json.RawMessage) ([]Message, error) {
	if s, ok := asString(content); ok {
		return []Message{{Role: role, Content: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(content, &blocks); err != nil {
		return nil, errors.New("content: want a string or a list of blocks")
	}
	var out []Message
	msg := Message{Role: role}
	var text strings.Builder
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := string(b.Input)
			if len(bytes.TrimSpace(b.Input)) == 0 {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			result, err := joinText(b.Content, "tool_result.content")
			if err != nil {
				return nil, err
			}
			out = append(out, Message{Role: "tool", Content: result, ToolCallID: b.ToolUseID})
		}
	}
	msg.Content = text.String()
	if msg.Content != "" || len(msg.ToolCalls) > 0 || len(out) == 0 {
		out = append(out, msg)
	}
	return out, nil
}

// joinText reads a content field that is absent, null, a string, or a list
// of parts, joining the parts' text.
func joinText(raw json.RawMessage, field string) (string, error) {
	if s, ok := asString(raw); ok {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("%s: want a string or a list of parts", field)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// asString reads raw as a string; absent and null read as "".
func asString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}
