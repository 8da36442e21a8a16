package model

import "github.com/formica-run/formica/internal/pack"

// Pack writes u as its msgpack tags describe (see package pack).
func (u *Usage) Pack(w *pack.Writer) {
	w.Map(2)
	w.Int64("input_tokens", u.InputTokens)
	w.Int64("output_tokens", u.OutputTokens)
}

// PackOpt writes a under key k unless it is empty (an omitempty field).
func (a Args) PackOpt(w *pack.Writer, k string) {
	if len(a) > 0 {
		w.Key(k)
		w.Value(map[string]any(a))
	}
}

// Pack writes m as its msgpack tags describe (see package pack): every
// model entry of a journal carries one.
func (m *Message) Pack(w *pack.Writer) {
	w.Map(1 + pack.Count(m.Content != "", len(m.ToolCalls) > 0, m.ToolCallID != "", m.ToolName != "", len(m.Reasoning) > 0))
	w.Str("role", string(m.Role))
	w.OptStr("content", m.Content)
	if len(m.ToolCalls) > 0 {
		w.Key("tool_calls")
		w.Check(w.Enc.EncodeArrayLen(len(m.ToolCalls)))
		for _, c := range m.ToolCalls {
			w.Map(3)
			w.Str("id", c.ID)
			w.Str("name", c.Name)
			w.Str("arguments", c.Arguments)
		}
	}
	w.OptStr("tool_call_id", m.ToolCallID)
	w.OptStr("tool_name", m.ToolName)
	if len(m.Reasoning) > 0 {
		w.Key("reasoning")
		w.Check(w.Enc.EncodeArrayLen(len(m.Reasoning)))
		for _, r := range m.Reasoning {
			w.Map(pack.Count(r.Text != "", r.Signature != "", r.Redacted != ""))
			w.OptStr("text", r.Text)
			w.OptStr("signature", r.Signature)
			w.OptStr("redacted", r.Redacted)
		}
	}
}
