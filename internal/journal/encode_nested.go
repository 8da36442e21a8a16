package journal

import (
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
)

// The agent spec of a start entry and the assistant message of a model
// entry, encoded by hand: every helper journals both, and the reflective
// encoder checks and boxes each field (about 90 allocations for a full
// spec, 6 for a message). These functions write the bytes the reflective
// encoder writes for the same value (tags, omitempty, field order, nil
// against empty slices, int widths), held to it byte for byte by
// TestEncodeNestedMatchesTheTags, which fills every field by reflection: a
// field added to either type and not written here fails it. Only the
// journal uses them; the spec's own encoding (on the wire, and its hash)
// is the reflective one.

func (w *writer) agent(a *spec.Agent) {
	enc := w.enc
	n := 2 // name, harness: never omitted (a Harness always has its tools)
	n += count(a.Instructions != "", a.Model != "", len(a.ModelArgs) > 0, len(a.Tools) > 0, a.ParallelToolCalls != nil,
		a.MaxTurns != 0, len(a.OutputSchema) > 0, len(a.Handoffs) > 0, !helperEmpty(&a.Helper), !a.Budget.IsZero())
	w.check(enc.EncodeMapLen(n))
	w.str("name", a.Name)
	w.optStr("instructions", a.Instructions)
	w.optStr("model", a.Model)
	if len(a.ModelArgs) > 0 {
		w.key("model_args")
		w.check(enc.Encode(map[string]any(a.ModelArgs)))
	}
	w.optStrs("tools", a.Tools)
	if a.ParallelToolCalls != nil {
		w.key("parallel_tool_calls")
		w.check(enc.EncodeBool(*a.ParallelToolCalls))
	}
	w.optInt("max_turns", a.MaxTurns)
	if len(a.OutputSchema) > 0 {
		w.key("output_schema")
		w.check(enc.EncodeBytes(a.OutputSchema))
	}
	w.optStrs("handoffs", a.Handoffs)
	w.key("harness")
	w.harness(&a.Harness)
	if !helperEmpty(&a.Helper) {
		w.key("helper")
		w.helper(&a.Helper)
	}
	if !a.Budget.IsZero() {
		w.key("budget")
		w.budget(&a.Budget)
	}
}

func (w *writer) harness(h *spec.Harness) {
	enc := w.enc
	n := 1 // tools: not omitempty (nil is all base tools, empty none)
	n += count(h.Cwd != "", !permissionsEmpty(&h.Permissions), h.Sandbox != (spec.Sandbox{}), len(h.MCP) > 0)
	w.check(enc.EncodeMapLen(n))
	w.optStr("cwd", h.Cwd)
	w.key("tools")
	w.strs(h.Tools)
	if !permissionsEmpty(&h.Permissions) {
		w.key("permissions")
		w.permissions(&h.Permissions)
	}
	if s := h.Sandbox; s != (spec.Sandbox{}) {
		w.key("sandbox")
		w.check(enc.EncodeMapLen(count(s.Network, s.CPU != "", s.Memory != "", s.Processes != 0, s.FileSize != "", s.Timeout != "")))
		if s.Network {
			w.key("network")
			w.check(enc.EncodeBool(true))
		}
		w.optStr("cpu", s.CPU)
		w.optStr("memory", s.Memory)
		w.optInt("processes", s.Processes)
		w.optStr("file_size", s.FileSize)
		w.optStr("timeout", s.Timeout)
	}
	w.optStrs("mcp", h.MCP)
}

func permissionsEmpty(p *policy.Permission) bool { return p.Default == "" && len(p.Rules) == 0 }

func (w *writer) permissions(p *policy.Permission) {
	enc := w.enc
	w.check(enc.EncodeMapLen(count(p.Default != "", len(p.Rules) > 0)))
	w.optStr("default", string(p.Default))
	if len(p.Rules) == 0 {
		return
	}
	w.key("rules")
	w.check(enc.EncodeArrayLen(len(p.Rules)))
	for _, r := range p.Rules {
		w.check(enc.EncodeMapLen(2 + count(r.Match != "")))
		w.str("tool", r.Tool)
		w.optStr("match", r.Match)
		w.str("decision", string(r.Decision))
	}
}

func helperEmpty(h *spec.Helper) bool {
	return h.Instructions == "" && h.Model == "" && len(h.ModelArgs) == 0 && len(h.OutputSchema) == 0 &&
		toolPolicyEmpty(&h.Tools) && h.Budget.IsZero()
}

func toolPolicyEmpty(p *spec.ToolPolicy) bool {
	return p.Policy == "" && len(p.Only) == 0 && len(p.Add) == 0
}

func (w *writer) helper(h *spec.Helper) {
	enc := w.enc
	w.check(enc.EncodeMapLen(count(h.Instructions != "", h.Model != "", len(h.ModelArgs) > 0, len(h.OutputSchema) > 0,
		!toolPolicyEmpty(&h.Tools), !h.Budget.IsZero())))
	w.optStr("instructions", h.Instructions)
	w.optStr("model", h.Model)
	if len(h.ModelArgs) > 0 {
		w.key("model_args")
		w.check(enc.Encode(map[string]any(h.ModelArgs)))
	}
	if len(h.OutputSchema) > 0 {
		w.key("output_schema")
		w.check(enc.EncodeBytes(h.OutputSchema))
	}
	if p := &h.Tools; !toolPolicyEmpty(p) {
		w.key("tools")
		w.check(enc.EncodeMapLen(count(p.Policy != "", len(p.Only) > 0, len(p.Add) > 0)))
		w.optStr("policy", string(p.Policy))
		w.optStrs("only", p.Only)
		w.optStrs("add", p.Add)
	}
	if !h.Budget.IsZero() {
		w.key("budget")
		w.budget(&h.Budget)
	}
}

func (w *writer) budget(b *limits.Budget) {
	w.check(w.enc.EncodeMapLen(count(b.Tokens != 0, b.InputTokens != 0, b.OutputTokens != 0, b.Duration != 0, b.Spawns != 0)))
	w.optInt64("tokens", b.Tokens)
	w.optInt64("input_tokens", b.InputTokens)
	w.optInt64("output_tokens", b.OutputTokens)
	w.optInt64("duration", int64(b.Duration))
	w.optInt("spawns", b.Spawns)
}

func (w *writer) message(m *model.Message) {
	enc := w.enc
	w.check(enc.EncodeMapLen(1 + count(m.Content != "", len(m.ToolCalls) > 0, m.ToolCallID != "", m.ToolName != "", len(m.Reasoning) > 0)))
	w.str("role", string(m.Role))
	w.optStr("content", m.Content)
	if len(m.ToolCalls) > 0 {
		w.key("tool_calls")
		w.check(enc.EncodeArrayLen(len(m.ToolCalls)))
		for _, c := range m.ToolCalls {
			w.check(enc.EncodeMapLen(3))
			w.str("id", c.ID)
			w.str("name", c.Name)
			w.str("arguments", c.Arguments)
		}
	}
	w.optStr("tool_call_id", m.ToolCallID)
	w.optStr("tool_name", m.ToolName)
	if len(m.Reasoning) > 0 {
		w.key("reasoning")
		w.check(enc.EncodeArrayLen(len(m.Reasoning)))
		for _, r := range m.Reasoning {
			w.check(enc.EncodeMapLen(count(r.Text != "", r.Signature != "", r.Redacted != "")))
			w.optStr("text", r.Text)
			w.optStr("signature", r.Signature)
			w.optStr("redacted", r.Redacted)
		}
	}
}

// count is how many of set are true: the length of a map of optional keys.
func count(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

func (w *writer) str(k, v string) {
	w.key(k)
	w.check(w.enc.EncodeString(v))
}

func (w *writer) optStr(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

// optInt writes an int field as the reflective encoder does: compact.
func (w *writer) optInt(k string, v int) {
	if v != 0 {
		w.key(k)
		w.check(w.enc.EncodeInt(int64(v)))
	}
}

// optInt64 writes an int64 field as the reflective encoder does: 9 bytes.
func (w *writer) optInt64(k string, v int64) {
	if v != 0 {
		w.key(k)
		w.check(w.enc.EncodeInt64(v))
	}
}

func (w *writer) optStrs(k string, v []string) {
	if len(v) > 0 {
		w.key(k)
		w.strs(v)
	}
}

// strs writes a string slice; nil as nil, as the reflective encoder does.
func (w *writer) strs(v []string) {
	if v == nil {
		w.check(w.enc.EncodeNil())
		return
	}
	w.check(w.enc.EncodeArrayLen(len(v)))
	for _, s := range v {
		w.check(w.enc.EncodeString(s))
	}
}
