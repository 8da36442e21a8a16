// Package spec is the serialisable definition of an agent: what a spec file
// holds, how it is checked, and how the `agent` tool's helper template turns
// into the spec of one helper.
package spec

import (
	"encoding/json"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

// DefaultMaxTurns bounds the model calls of one thread when a spec sets none.
const DefaultMaxTurns = 50

// Agent is one agent's definition. Every field travels over the wire with a
// helper, so everything here is plain data.
type Agent struct {
	Name         string     `json:"name" yaml:"name" msgpack:"name"`
	Instructions string     `json:"instructions,omitempty" yaml:"instructions,omitempty" msgpack:"instructions,omitempty"`
	Model        string     `json:"model,omitempty" yaml:"model,omitempty" msgpack:"model,omitempty"`
	ModelArgs    model.Args `json:"model_args,omitempty" yaml:"model_args,omitempty" msgpack:"model_args,omitempty"`
	// Tools names the agent's direct tools ("agent", or any registered tool).
	// The base harness tools come from Harness, not from here.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty" msgpack:"tools,omitempty"`
	// ParallelToolCalls runs all tool calls of one response at once; nil means true.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty" yaml:"parallel_tool_calls,omitempty" msgpack:"parallel_tool_calls,omitempty"`
	// MaxTurns bounds model calls; 0 means DefaultMaxTurns.
	MaxTurns int `json:"max_turns,omitempty" yaml:"max_turns,omitempty" msgpack:"max_turns,omitempty"`
	// ContextWindow is the model's context window in tokens: the thread
	// makes room in its conversation (elisions, then a summary) when a
	// request would pass 80% of it. 0 takes the model's from a built-in
	// table (model.Window).
	ContextWindow int64 `json:"context_window,omitempty" yaml:"context_window,omitempty" msgpack:"context_window,omitempty"`
	// OutputSchema, when set, is a JSON Schema the final answer must satisfy.
	OutputSchema json.RawMessage `json:"output_schema,omitempty" yaml:"-" msgpack:"output_schema,omitempty"`
	// Handoffs names agents of the same file this one may hand the conversation to.
	Handoffs []string `json:"handoffs,omitempty" yaml:"handoffs,omitempty" msgpack:"handoffs,omitempty"`
	Harness  Harness  `json:"harness,omitzero" yaml:"harness,omitempty" msgpack:"harness,omitempty"`
	// Helper configures the `agent` tool: what every helper this agent spawns is.
	Helper Helper `json:"helper,omitzero" yaml:"helper,omitempty" msgpack:"helper,omitempty"`
	// Budget bounds the whole run when this is the run's root agent
	// (durations in YAML as "10m"); a submission's budget flags override it.
	Budget limits.Budget `json:"budget,omitzero" yaml:"budget,omitempty" msgpack:"budget,omitempty"`
}

// Harness is where the agent's base tools act and under which permissions.
type Harness struct {
	// Cwd is the directory file tools are confined to and bash runs in;
	// empty means the directory given on the command line.
	Cwd string `json:"cwd,omitempty" yaml:"cwd,omitempty" msgpack:"cwd,omitempty"`
	// Tools lists which base tools the harness offers; nil means all of them,
	// an empty list none.
	Tools       []string          `json:"tools" yaml:"tools" msgpack:"tools"`
	Permissions policy.Permission `json:"permissions,omitzero" yaml:"permissions,omitempty" msgpack:"permissions,omitempty"`
	// Sandbox tunes the sandbox of the agent's bash calls.
	Sandbox Sandbox `json:"sandbox,omitzero" yaml:"sandbox,omitempty" msgpack:"sandbox,omitempty"`
	// MCP names the worker's MCP servers whose tools the harness offers
	// (mcp__<server>__<tool>). A spec only names servers: what each one
	// runs is the operator's worker configuration (--mcp-config).
	MCP []string `json:"mcp,omitempty" yaml:"mcp,omitempty" msgpack:"mcp,omitempty"`
	// AtMostOnce names tools (name globs, as in permission rules: bash,
	// mcp__pay__*) whose calls must not run twice. Each call of one is
	// journaled as started before it runs; a thread that runs again after a
	// failure and finds one started but not answered does not run it
	// again: the call is in doubt (InDoubt). Other tools' calls in flight
	// at a failure run again (at least once).
	AtMostOnce []string `json:"at_most_once,omitempty" yaml:"at_most_once,omitempty" msgpack:"at_most_once,omitempty"`
	// InDoubt is what becomes of a call in doubt: report (the default)
	// or ask.
	InDoubt InDoubt `json:"in_doubt,omitempty" yaml:"in_doubt,omitempty" msgpack:"in_doubt,omitempty"`
}

// Helper is the `agent` tool's template, never shown to the model.
type Helper struct {
	Instructions string `json:"instructions,omitempty" yaml:"instructions,omitempty" msgpack:"instructions,omitempty"`
	// Model is a model reference; empty inherits the parent's model and args.
	Model     string     `json:"model,omitempty" yaml:"model,omitempty" msgpack:"model,omitempty"`
	ModelArgs model.Args `json:"model_args,omitempty" yaml:"model_args,omitempty" msgpack:"model_args,omitempty"`
	// ContextWindow is each helper's context window in tokens; 0 is the
	// parent's when the helper has its parent's model, else its model's
	// from the built-in table.
	ContextWindow int64 `json:"context_window,omitempty" yaml:"context_window,omitempty" msgpack:"context_window,omitempty"`
	// OutputSchema, when set, is the JSON Schema each helper's answer must meet.
	OutputSchema json.RawMessage `json:"output_schema,omitempty" yaml:"-" msgpack:"output_schema,omitempty"`
	Tools        ToolPolicy      `json:"tools,omitzero" yaml:"tools,omitempty" msgpack:"tools,omitempty"`
	// Budget bounds each helper's whole subtree, inside its parent's budget.
	Budget limits.Budget `json:"budget,omitzero" yaml:"budget,omitempty" msgpack:"budget,omitempty"`
	// AtMostOnce names more tools whose calls must not run twice in each
	// helper, besides the parent's harness.at_most_once, which every
	// helper keeps.
	AtMostOnce []string `json:"at_most_once,omitempty" yaml:"at_most_once,omitempty" msgpack:"at_most_once,omitempty"`
}

// ToolPolicy says which of the parent's direct tools a helper gets.
type ToolPolicy struct {
	// Policy is inherit (the default), override or restrict.
	Policy policy.Visibility `json:"policy,omitempty" yaml:"policy,omitempty" msgpack:"policy,omitempty"`
	// Only names the parent's tools kept under restrict.
	Only []string `json:"only,omitempty" yaml:"only,omitempty" msgpack:"only,omitempty"`
	// Add names the helper's own direct tools (L in the visibility rules).
	Add []string `json:"add,omitempty" yaml:"add,omitempty" msgpack:"add,omitempty"`
}

// File is a spec file: a root agent and the agents it may hand off to.
type File struct {
	Agent  `yaml:",inline"`
	Agents []Agent `json:"agents,omitempty" yaml:"agents,omitempty"`
}

// ParallelCalls reports whether tool calls of one response run concurrently.
func (a *Agent) ParallelCalls() bool { return a.ParallelToolCalls == nil || *a.ParallelToolCalls }

// Turns is the effective turn limit.
func (a *Agent) Turns() int {
	if a.MaxTurns <= 0 {
		return DefaultMaxTurns
	}
	return a.MaxTurns
}
