package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// maxEventOutput bounds the tool output copied into an event; the model still
// gets all of it.
const maxEventOutput = 4 << 10

// callTools runs one response's tool calls, all at once when the agent allows
// parallel calls and one by one otherwise, and returns their outputs in call
// order. target is the agent a transfer_to_<name> call handed off to, if any:
// the first such call wins.
func (st *threadState) callTools(ctx context.Context, calls []model.ToolCall) (outputs []string, target string) {
	outputs = make([]string, len(calls))
	for i, c := range calls {
		name, ok := st.handoffs[c.Name]
		if !ok {
			continue
		}
		if target == "" {
			target = name
			outputs[i] = "Transferred to " + name + "."
		} else {
			outputs[i] = "Ignored: the conversation is already being transferred to " + target + "."
		}
	}
	pending := func(i int) bool { _, isHandoff := st.handoffs[calls[i].Name]; return !isHandoff }

	if !st.agent.ParallelCalls() {
		for i, c := range calls {
			if pending(i) {
				outputs[i] = st.call(ctx, c)
			}
		}
		return outputs, target
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		if pending(i) {
			wg.Go(func() { outputs[i] = st.call(ctx, c) })
		}
	}
	wg.Wait()
	return outputs, target
}

// call runs one tool call through the permission gate and returns what the
// model sees. Every failure is a result text, never an error.
func (st *threadState) call(ctx context.Context, c model.ToolCall) string {
	e := st.th.event(event.ToolCall)
	e.Tool, e.CallID, e.Arguments = c.Name, c.ID, c.Arguments
	st.r.emit(e)

	start := time.Now()
	out, outcome := st.execute(ctx, c)
	if obs := st.r.cfg.Observer; obs != nil {
		obs.ToolCall(c.Name, outcome, time.Since(start))
	}

	e = st.th.event(event.ToolResult)
	e.Tool, e.CallID = c.Name, c.ID
	e.Output = event.Clip(out, maxEventOutput)
	st.r.emit(e)
	return out
}

func (st *threadState) execute(ctx context.Context, c model.ToolCall) (out, outcome string) {
	t, ok := st.byName[c.Name]
	if !ok {
		return fmt.Sprintf("Error: unknown tool %q. Available tools: %s.", c.Name, strings.Join(tools.Names(st.visible), ", ")), ToolError
	}
	args := json.RawMessage(c.Arguments)
	if strings.TrimSpace(c.Arguments) == "" {
		args = json.RawMessage("{}")
	}
	if c.Name != tools.AgentToolName {
		if verdict, allowed := st.gate(ctx, t, c.Name, args); !allowed {
			return verdict, ToolDenied
		}
		// Asked last, right before the side effect: an approval may have
		// waited long enough for the thread's placement to lapse.
		if guard := st.r.cfg.CallGuard; guard != nil {
			if err := guard(ctx, st.th); err != nil {
				return "Error: " + err.Error(), ToolError
			}
		}
	}
	ctx = tools.WithCallID(tools.WithSpawner(ctx, &threadSpawner{st: st}), c.ID)
	out, err := t.Run(ctx, args)
	if err != nil {
		return "Error: " + err.Error(), ToolError
	}
	return out, ToolOK
}

// gate applies the thread's permission stack. A denied call returns the text
// the model sees instead of the tool's output.
func (st *threadState) gate(ctx context.Context, t tools.Tool, name string, args json.RawMessage) (string, bool) {
	subject := ""
	if s, ok := t.(tools.Subjecter); ok {
		subject = s.Subject(args)
	}
	switch st.permStack.Decide(name, subject) {
	case tools.Allow:
		return "", true
	case tools.Ask:
		return st.ask(ctx, name, args)
	}
	return tools.DeniedText(name), false
}

func (st *threadState) ask(ctx context.Context, name string, args json.RawMessage) (string, bool) {
	req := tools.ApprovalRequest{RunID: st.th.RunID, ThreadID: st.th.ID, ThreadPath: st.th.Path, Tool: name, Arguments: string(args)}
	e := st.th.event(event.ApprovalRequested)
	e.Tool, e.Arguments = name, req.Arguments
	st.r.emit(e)

	ap, err := st.r.cfg.Approver.Approve(ctx, req)
	if err != nil {
		ap = tools.Approval{Reason: err.Error()}
	}
	e = st.th.event(event.ApprovalResolved)
	e.Tool, e.Reason, e.Decision = name, ap.Reason, "deny"
	if ap.Allow {
		e.Decision = "allow"
	}
	st.r.emit(e)
	if !ap.Allow {
		return tools.NotApprovedText(name, ap.Reason), false
	}
	return "", true
}

// threadSpawner is the spawner the agent tool finds in its context: it builds
// the helper's spec from the calling agent's template and counts the helper's
// tokens into the caller's.
type threadSpawner struct{ st *threadState }

func (s *threadSpawner) Spawn(ctx context.Context, name, task string) (tools.HelperResult, error) {
	st := s.st
	var spent model.Usage
	if m := meterFrom(ctx); m != nil {
		spent = m.Park()
	}
	res, err := st.r.spawner.Spawn(ctx, SpawnRequest{
		ParentSpent: spent,
		RunID:       st.th.RunID,
		ParentID:    st.th.ID,
		ParentDepth: st.th.Depth,
		ParentPath:  st.th.Path,
		CallID:      tools.CallIDFrom(ctx),
		Handoffs:    st.handedTo,
		Name:        name,
		Task:        task,
		Agent:       spec.HelperSpec(st.agent, name),
		Cwd:         st.th.Cwd,
		Permissions: st.permStack,
	})
	if err != nil {
		return tools.HelperResult{}, err
	}
	st.addHelper(res.Usage)
	if res.Status != event.Succeeded {
		reason := res.Error
		if reason == "" {
			reason = string(res.Status)
		}
		return tools.HelperResult{Failed: true, Reason: reason}, nil
	}
	return tools.HelperResult{Output: res.Output}, nil
}
