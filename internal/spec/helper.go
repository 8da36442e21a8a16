package spec

import (
	"cmp"
	"maps"
	"slices"

	"github.com/formica-run/formica/internal/policy"
)

// DefaultHelperInstructions is a helper's system prompt when its template
// gives none.
const DefaultHelperInstructions = "You are a focused helper agent. Complete the task you are given " +
	"and reply with the result. You see only this task, not the conversation it came from, " +
	"so do not ask for more context: do your best with what you have."

// HelperSpec is the spec of one helper spawned by parent's `agent` tool under
// the given name, following DESIGN's "The `agent` tool" and "Tool visibility":
//
//   - Instructions: the template's, or DefaultHelperInstructions.
//   - Model: the template's model with only the template's model args; with
//     no template model, the parent's model and the parent's args overridden
//     by the template's.
//   - ContextWindow: the template's; unset, the parent's when the helper
//     has the parent's model (no template model), else 0 (its model's
//     from the built-in table).
//   - OutputSchema: the template's.
//   - Tools (direct tool names) by the template's policy, P the parent's tools
//     and L the template's add list: inherit P ∪ L, override L, restrict
//     {P ∩ only} ∪ L. Parent order first, then L's names not yet present;
//     each name once. (Which implementation runs a name — a local tool
//     replacing an inherited one — is the runner's business, not the spec's.)
//   - Harness: the parent's (same cwd, same permissions: a helper inherits its
//     parent's policy), with the template's at_most_once added to the
//     parent's. ParallelToolCalls and MaxTurns: the parent's.
//   - Helper: the parent's template, so helpers of helpers are alike.
//   - Handoffs: none.
//
// The result shares no memory with parent, so it may travel and be changed freely.
func HelperSpec(parent Agent, name string) Agent {
	var a Agent
	SetHelperSpec(&a, &parent, name)
	return a
}

// SetHelperSpec writes HelperSpec(parent, name) into a, field by field: on a
// spawn's path a spec built as a value and copied on takes kilobytes of stack
// in each frame it passes, and a fresh handler goroutine grows its stack for
// them.
func SetHelperSpec(a, parent *Agent, name string) {
	h := &parent.Helper
	*a = Agent{}
	a.Name = name
	a.Instructions = cmp.Or(h.Instructions, DefaultHelperInstructions)
	a.OutputSchema = slices.Clone(h.OutputSchema)
	a.MaxTurns = parent.MaxTurns
	a.Harness = parent.Harness
	a.Harness.Tools = slices.Clone(a.Harness.Tools)
	a.Harness.MCP = slices.Clone(a.Harness.MCP)
	a.Harness.Permissions.Rules = slices.Clone(a.Harness.Permissions.Rules)
	a.Harness.AtMostOnce = slices.Clone(a.Harness.AtMostOnce)
	a.Harness.AddOnce(&Harness{AtMostOnce: h.AtMostOnce})
	a.Helper = parent.Helper
	a.Helper.ModelArgs = maps.Clone(a.Helper.ModelArgs)
	a.Helper.OutputSchema = slices.Clone(a.Helper.OutputSchema)
	a.Helper.Tools.Only = slices.Clone(a.Helper.Tools.Only)
	a.Helper.Tools.Add = slices.Clone(a.Helper.Tools.Add)
	a.Helper.AtMostOnce = slices.Clone(a.Helper.AtMostOnce)
	a.ContextWindow = h.ContextWindow
	if h.Model != "" {
		a.Model = h.Model
		a.ModelArgs = maps.Clone(h.ModelArgs)
	} else {
		a.Model = parent.Model
		a.ModelArgs = parent.ModelArgs.Merge(h.ModelArgs)
		if a.ContextWindow == 0 {
			a.ContextWindow = parent.ContextWindow
		}
	}
	if parent.ParallelToolCalls != nil {
		p := *parent.ParallelToolCalls
		a.ParallelToolCalls = &p
	}
	a.Tools = helperTools(&h.Tools, parent.Tools)
}

// helperTools applies a tool policy to tool names; an unknown policy (which
// Validate refuses) gives no inherited tools.
func helperTools(pol *ToolPolicy, parent []string) []string {
	vis, _ := policy.ParseVisibility(string(pol.Policy))
	var kept []string
	switch vis {
	case policy.Inherit:
		kept = parent
	case policy.Restrict:
		for _, t := range parent {
			if slices.Contains(pol.Only, t) {
				kept = append(kept, t)
			}
		}
	}
	var out []string
	for _, t := range slices.Concat(kept, pol.Add) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Catalog returns every agent of the file by name, the root included; it is
// where handoff targets are looked up.
func (f *File) Catalog() map[string]Agent {
	out := make(map[string]Agent, 1+len(f.Agents))
	out[f.Name] = f.Agent
	for _, a := range f.Agents {
		out[a.Name] = a
	}
	return out
}

// DefaultInstructions is the system prompt of the built-in general agent.
const DefaultInstructions = "You are Formica, a capable general-purpose agent. " +
	"When a task splits into independent sub-tasks, delegate them with the `agent` tool: " +
	"call it once per sub-task, with a short one-word name and a complete, self-contained task " +
	"(the helper sees nothing but that task); calls made in the same turn run in parallel. " +
	"Otherwise, and for anything small or sequential, answer directly yourself. " +
	"When helpers reply, combine their results into one final answer."

// Default is the built-in general agent used when no spec file is given:
// named "formica", with the `agent` tool, helpers that inherit everything, and
// a harness where reading is allowed and writing or running commands asks.
// Its model is left empty for the caller to fill in.
func Default() File {
	return File{Agent: Agent{
		Name:         "formica",
		Instructions: DefaultInstructions,
		Tools:        []string{"agent"},
		Harness: Harness{Permissions: policy.Permission{
			Default: policy.Ask,
			Rules: []policy.Rule{
				{Tool: "read_file", Decision: policy.Allow},
				{Tool: "list_dir", Decision: policy.Allow},
				{Tool: "glob", Decision: policy.Allow},
				{Tool: "grep", Decision: policy.Allow},
				{Tool: "write_file", Decision: policy.Ask},
				{Tool: "edit_file", Decision: policy.Ask},
				{Tool: "bash", Decision: policy.Ask},
			},
		}},
		Helper: Helper{
			Instructions: DefaultHelperInstructions,
			Tools:        ToolPolicy{Policy: policy.Inherit},
		},
	}}
}
