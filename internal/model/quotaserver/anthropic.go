package quotaserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// anthropicContent is one content block of an answer.
type anthropicContent struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthropicMessage struct {
	ID           string             `json:"id"`
	Type         string             `json:"type"`
	Role         string             `json:"role"`
	Model        string             `json:"model"`
	Content      []anthropicContent `json:"content"`
	StopReason   *string            `json:"stop_reason"`
	StopSequence *string            `json:"stop_sequence"`
	Usage        anthropicUsage     `json:"usage"`
}

func anthropicPlain(a *answer) []byte {
	content := []anthropicContent{}
	for _, b := range a.blocks() {
		if b.call < 0 {
			content = append(content, anthropicContent{Type: "text", Text: &b.text})
			continue
		}
		c := a.calls[b.call]
		content = append(content, anthropicContent{Type: "tool_use", ID: c.ID, Name: c.Name,
			Input: json.RawMessage(c.Arguments)})
	}
	stop := a.reason("tool_use", "end_turn")
	return mustJSON(anthropicMessage{ID: a.id, Type: "message", Role: "assistant", Model: a.model,
		Content: content, StopReason: &stop, Usage: anthropicUsage{a.inputTokens, a.outputTokens}})
}

// frames streams as the Messages API does: message_start (usage with the
// input tokens), a ping, then per content block content_block_start, its
// deltas (text_delta for text, input_json_delta fragments for a tool_use
// block, which starts with empty input) and content_block_stop; then
// message_delta with the stop reason and the output tokens, and message_stop.
func anthropicFrames(a *answer) []frame {
	ev := func(typ string, v any) []byte {
		return []byte("event: " + typ + "\ndata: " + string(mustJSON(v)) + "\n\n")
	}
	type index struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	type delta struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	start := anthropicMessage{ID: a.id, Type: "message", Role: "assistant", Model: a.model,
		Content: []anthropicContent{}, Usage: anthropicUsage{a.inputTokens, 1}}
	out := []frame{
		{0, ev("message_start", struct {
			Type    string           `json:"type"`
			Message anthropicMessage `json:"message"`
		}{"message_start", start})},
		{0, ev("ping", struct {
			Type string `json:"type"`
		}{"ping"})},
	}
	open, inText := -1, false
	stop := func(at time.Duration) {
		if open >= 0 {
			out = append(out, frame{at, ev("content_block_stop", index{"content_block_stop", open})})
		}
	}
	begin := func(at time.Duration, c anthropicContent) {
		stop(at)
		open++
		out = append(out, frame{at, ev("content_block_start", struct {
			Type         string           `json:"type"`
			Index        int              `json:"index"`
			ContentBlock anthropicContent `json:"content_block"`
		}{"content_block_start", open, c})})
	}
	add := func(at time.Duration, d delta) {
		out = append(out, frame{at, ev("content_block_delta", struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta delta  `json:"delta"`
		}{"content_block_delta", open, d})})
	}
	for _, p := range a.pieces {
		switch p.kind {
		case textPiece:
			if !inText {
				empty := ""
				begin(p.at, anthropicContent{Type: "text", Text: &empty})
				inText = true
			}
			add(p.at, delta{Type: "text_delta", Text: &p.text})
		case callStart:
			c := a.calls[p.call]
			begin(p.at, anthropicContent{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage("{}")})
			inText = false
		case callArgs:
			add(p.at, delta{Type: "input_json_delta", PartialJSON: &p.text})
		}
	}
	stop(a.end)
	reason := a.reason("tool_use", "end_turn")
	type stopDelta struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	type outputUsage struct {
		OutputTokens int `json:"output_tokens"`
	}
	out = append(out, frame{a.end, ev("message_delta", struct {
		Type  string      `json:"type"`
		Delta stopDelta   `json:"delta"`
		Usage outputUsage `json:"usage"`
	}{"message_delta", stopDelta{StopReason: &reason}, outputUsage{a.outputTokens}})})
	return append(out, frame{a.end, ev("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})})
}

func anthropicErrorBody(status int, msg string) []byte {
	typ := "invalid_request_error"
	switch status {
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	}
	type body struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return mustJSON(struct {
		Type  string `json:"type"`
		Error body   `json:"error"`
	}{"error", body{typ, msg}})
}

// resetLayout is RFC 3339 with milliseconds: Anthropic's resets are times,
// and whole seconds would be too coarse for a quota refilling in 100ms.
const resetLayout = "2006-01-02T15:04:05.000Z07:00"

func anthropicLimitHeaders(h http.Header, q quota) {
	set := func(kind string, l *limitState) {
		if l == nil {
			return
		}
		h.Set("anthropic-ratelimit-"+kind+"-limit", strconv.FormatInt(l.limit, 10))
		h.Set("anthropic-ratelimit-"+kind+"-remaining", strconv.FormatInt(l.remaining, 10))
		h.Set("anthropic-ratelimit-"+kind+"-reset", ceilTime(q.now.Add(l.reset)).UTC().Format(resetLayout))
	}
	set("requests", q.requests)
	set("tokens", q.tokens)
	set("input-tokens", q.tokens)
}

// ceilTime rounds t up to the millisecond, so the reset a client reads is
// never before the real one.
func ceilTime(t time.Time) time.Time {
	if c := t.Truncate(time.Millisecond); c.Before(t) {
		return c.Add(time.Millisecond)
	}
	return t
}
