package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/tools/base"
)

// HandoffPrefix starts the name of every handoff tool.
const HandoffPrefix = "transfer_to_"

// toolset is what an agent sees: its visible tools, by name, their schemas
// as the model is given them, and which of them hand off to which agent.
// It is never changed once built, so threads that see the same tools share
// one (toolsFor).
type toolset struct {
	visible  []tools.Tool
	byName   map[string]tools.Tool
	schemas  []model.ToolSchema
	handoffs map[string]string // tool name -> agent name
}

func newToolset(visible []tools.Tool, handoffs map[string]string) *toolset {
	ts := &toolset{visible: visible, byName: make(map[string]tools.Tool, len(visible)),
		schemas: tools.Schemas(visible), handoffs: handoffs}
	for _, t := range visible {
		ts.byName[t.Name()] = t
	}
	return ts
}

// maxCachedToolsets bounds the toolsets kept for sharing.
const maxCachedToolsets = 1024

// toolsetKey names a shared toolset: the base tools' directory and
// sandbox, and the spec's direct tools and harness tools (nil, offering
// every shim, apart from an empty list, offering none).
type toolsetKey struct {
	harness      harnessKey
	direct       string
	harnessTools string
}

// sharedToolsetKey is the key of a's toolset in th, and whether it may be
// shared: not when it has MCP tools (a session's, listed anew when they
// change) or handoff tools (described from the thread's own targets).
func sharedToolsetKey(th *thread.Thread, a *spec.Agent) (toolsetKey, bool) {
	if len(a.Harness.MCP) > 0 || len(a.Handoffs) > 0 {
		return toolsetKey{}, false
	}
	offered := "*"
	if a.Harness.Tools != nil {
		offered = "=" + strings.Join(a.Harness.Tools, "\x00")
	}
	return toolsetKey{harness: harnessKey{th.Cwd, a.Harness.Sandbox}, direct: strings.Join(a.Tools, "\x00"), harnessTools: offered}, true
}

// toolsFor returns what agent a sees in thread th: its direct tools (named
// in the spec: `agent`, configured extra tools, base or MCP tools), the
// harness shims (base tools bound to the thread's cwd, and the tools of the
// MCP servers harness.mcp names), and one transfer_to_<name> tool per
// handoff, merged so each name appears once and direct beats shim. Threads
// whose agents see the same tools share one toolset, as they share base
// tools: thousands of helpers of one spec hold one set of schemas.
func (r *Runner) toolsFor(ctx context.Context, th *thread.Thread, a *spec.Agent) (*toolset, error) {
	key, shared := sharedToolsetKey(th, a)
	if shared {
		if v, ok := r.toolsets.Load(key); ok {
			return v.(*toolset), nil
		}
	}
	visible, handoffs, err := r.buildTools(ctx, th, a)
	if err != nil {
		return nil, err
	}
	ts := newToolset(visible, handoffs)
	if shared && r.toolsetCount.Add(1) <= maxCachedToolsets {
		r.toolsets.Store(key, ts)
	}
	return ts, nil
}

// buildTools builds the tools of toolsFor.
func (r *Runner) buildTools(ctx context.Context, th *thread.Thread, a *spec.Agent) (visible []tools.Tool, handoffs map[string]string, err error) {
	all, err := r.baseTools(th.Cwd, a.Harness.Sandbox)
	if err != nil {
		return nil, nil, err
	}
	if len(a.Harness.MCP) > 0 {
		if r.cfg.MCP == nil {
			return nil, nil, fmt.Errorf("%w: harness.mcp names %s, but this worker has no MCP servers (see --mcp-config)", ErrNoMCP, strings.Join(a.Harness.MCP, ", "))
		}
		mcpTools, err := r.cfg.MCP.Tools(ctx, th.RunID, th.ID, th.Cwd, a.Harness.MCP)
		if err != nil {
			return nil, nil, err
		}
		all = tools.Merge(all, mcpTools)
	}
	var shims []tools.Tool
	for _, t := range all {
		if harnessOffers(a.Harness.Tools, t.Name()) {
			shims = append(shims, t)
		}
	}
	direct := make([]tools.Tool, 0, len(a.Tools))
	for _, name := range a.Tools {
		t, ok := r.registry[name]
		if !ok {
			i := slices.IndexFunc(all, func(t tools.Tool) bool { return t.Name() == name })
			if i < 0 {
				return nil, nil, fmt.Errorf("%w: %q", tools.ErrUnknownTool, name)
			}
			t = all[i]
		}
		direct = append(direct, t)
	}
	var transfers []tools.Tool
	for _, name := range a.Handoffs {
		target, ok := th.Agents[name]
		if !ok {
			return nil, nil, fmt.Errorf("%w: handoff target %q", ErrUnknownAgent, name)
		}
		if handoffs == nil {
			handoffs = map[string]string{}
		}
		tool := handoffTool(target)
		handoffs[tool.Name()] = name
		transfers = append(transfers, tool)
	}
	return tools.Merge(direct, shims, transfers), handoffs, nil
}

// harnessOffers reports whether harness.tools offers the named shim: nil
// offers all, otherwise a name or a glob ("mcp__github__*") must match.
func harnessOffers(list []string, name string) bool {
	return list == nil || slices.ContainsFunc(list, func(p string) bool {
		ok, _ := path.Match(p, name)
		return ok || p == name
	})
}

// HandoffToolName is the tool that hands over to agent name. Dots, which
// agent names allow and some providers refuse in tool names, become '_'.
func HandoffToolName(name string) string {
	return HandoffPrefix + strings.ReplaceAll(name, ".", "_")
}

// maxCachedHarnesses bounds the base tool sets kept per directory and sandbox.
const maxCachedHarnesses = 1024

// baseTools returns the base tools bound to cwd under the agent's sandbox
// settings. They are safe for concurrent use, so threads in the same
// directory with the same settings share one set instead of resolving the
// directory again for every helper.
func (r *Runner) baseTools(cwd string, sb spec.Sandbox) ([]tools.Tool, error) {
	key := harnessKey{cwd, sb}
	if v, ok := r.harnesses.Load(key); ok {
		return v.([]tools.Tool), nil
	}
	limits, timeout, err := sb.Limits()
	if err != nil {
		return nil, fmt.Errorf("harness.sandbox: %w", err)
	}
	bashTimeout, maxTimeout := r.cfg.Harness.BashTimeout, time.Duration(0)
	if timeout > 0 {
		maxTimeout = max(base.DefaultBashMaxTimeout, bashTimeout)
		bashTimeout = min(timeout, maxTimeout)
	}
	all, err := base.New(base.Config{
		Cwd:            cwd,
		BashTimeout:    bashTimeout,
		BashMaxTimeout: maxTimeout,
		Sandbox:        r.cfg.Harness.Sandbox,
		Network:        sb.Network,
		Limits:         sandbox.Limits(limits),
	})
	if err != nil {
		return nil, err
	}
	if r.harnessCount.Add(1) <= maxCachedHarnesses {
		r.harnesses.Store(key, all)
	}
	return all, nil
}

// harnessKey names a cached base tool set.
type harnessKey struct {
	cwd string
	sb  spec.Sandbox
}

// handoffTool only describes a transfer to the model; the loop acts on the call
// itself and never runs it.
func handoffTool(target spec.Agent) tools.Tool {
	desc := "Hand the conversation over to agent " + target.Name + ", which carries on from here in your place."
	if first, _, _ := strings.Cut(strings.TrimSpace(target.Instructions), "\n"); first != "" {
		desc += " It is described as: " + first
	}
	return &tools.Func{
		ToolName:   HandoffToolName(target.Name),
		Desc:       desc,
		Parameters: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Fn: func(context.Context, json.RawMessage) (string, error) {
			return "Transferred to " + target.Name + ".", nil
		},
	}
}

// handoff switches the thread to another agent of the run's catalog: same
// thread, same depth, same conversation, the new agent's prompt, model and tools.
// The target's permissions can only narrow the thread's, and its
// at-most-once tools only add to the thread's.
func (st *threadState) handoff(name string) error {
	target, ok := st.th.Agents[name]
	if !ok {
		return fmt.Errorf("%w: handoff target %q", ErrUnknownAgent, name)
	}
	from := st.agent.Name
	st.permStack = st.permStack.Narrow(target.Harness.Permissions)
	st.once.AddOnce(&target.Harness)
	st.handedTo = append(st.handedTo, name)
	if err := st.become(&target); err != nil {
		return err
	}
	e := st.th.Event(event.ThreadHandoff)
	e.Reason = from + " -> " + name
	st.r.emit(e)
	return nil
}
