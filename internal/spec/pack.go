package spec

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/pack"
)

var _ msgpack.CustomEncoder = Agent{}

// EncodeMsgpack writes a as its msgpack tags describe (see package pack):
// a spec travels in placements, in journals and, encoded with sorted keys,
// in its content hash, and the reflective encoder took about 90
// allocations for a full one. The bytes, and so the hash, are the same.
func (a Agent) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	a.Pack(&w)
	return w.Err
}

// Pack writes a as its msgpack tags describe.
func (a *Agent) Pack(w *pack.Writer) {
	n := 2 // name, harness: never omitted (a Harness always has its tools)
	n += pack.Count(a.Instructions != "", a.Model != "", len(a.ModelArgs) > 0, len(a.Tools) > 0, a.ParallelToolCalls != nil,
		a.MaxTurns != 0, len(a.OutputSchema) > 0, len(a.Handoffs) > 0, !a.Helper.isEmpty(), !a.Budget.IsZero())
	w.Map(n)
	w.Str("name", a.Name)
	w.OptStr("instructions", a.Instructions)
	w.OptStr("model", a.Model)
	a.ModelArgs.PackOpt(w, "model_args")
	w.OptStrs("tools", a.Tools)
	if a.ParallelToolCalls != nil {
		w.Key("parallel_tool_calls")
		w.Check(w.Enc.EncodeBool(*a.ParallelToolCalls))
	}
	w.OptInt("max_turns", a.MaxTurns)
	w.OptBytes("output_schema", a.OutputSchema)
	w.OptStrs("handoffs", a.Handoffs)
	w.Key("harness")
	a.Harness.pack(w)
	if !a.Helper.isEmpty() {
		w.Key("helper")
		a.Helper.pack(w)
	}
	a.Budget.PackOpt(w, "budget")
}

func (h *Harness) pack(w *pack.Writer) {
	n := 1 // tools: not omitempty (nil is all base tools, empty none)
	n += pack.Count(h.Cwd != "", !h.Permissions.IsEmpty(), h.Sandbox != (Sandbox{}), len(h.MCP) > 0)
	w.Map(n)
	w.OptStr("cwd", h.Cwd)
	w.Key("tools")
	w.Strs(h.Tools)
	h.Permissions.PackOpt(w, "permissions")
	if s := h.Sandbox; s != (Sandbox{}) {
		w.Key("sandbox")
		w.Map(pack.Count(s.Network, s.CPU != "", s.Memory != "", s.Processes != 0, s.FileSize != "", s.Timeout != ""))
		w.OptBool("network", s.Network)
		w.OptStr("cpu", s.CPU)
		w.OptStr("memory", s.Memory)
		w.OptInt("processes", s.Processes)
		w.OptStr("file_size", s.FileSize)
		w.OptStr("timeout", s.Timeout)
	}
	w.OptStrs("mcp", h.MCP)
}

func (h *Helper) isEmpty() bool {
	return h.Instructions == "" && h.Model == "" && len(h.ModelArgs) == 0 && len(h.OutputSchema) == 0 &&
		h.Tools.isEmpty() && h.Budget.IsZero()
}

func (p *ToolPolicy) isEmpty() bool { return p.Policy == "" && len(p.Only) == 0 && len(p.Add) == 0 }

func (h *Helper) pack(w *pack.Writer) {
	w.Map(pack.Count(h.Instructions != "", h.Model != "", len(h.ModelArgs) > 0, len(h.OutputSchema) > 0,
		!h.Tools.isEmpty(), !h.Budget.IsZero()))
	w.OptStr("instructions", h.Instructions)
	w.OptStr("model", h.Model)
	h.ModelArgs.PackOpt(w, "model_args")
	w.OptBytes("output_schema", h.OutputSchema)
	if p := &h.Tools; !p.isEmpty() {
		w.Key("tools")
		w.Map(pack.Count(p.Policy != "", len(p.Only) > 0, len(p.Add) > 0))
		w.OptStr("policy", string(p.Policy))
		w.OptStrs("only", p.Only)
		w.OptStrs("add", p.Add)
	}
	h.Budget.PackOpt(w, "budget")
}
