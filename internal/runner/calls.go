package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/tracing"
)

// maxEventOutput bounds the tool output copied into an event; the model still
// gets all of it.
const maxEventOutput = 4 << 10

// maxEventArguments bounds the arguments copied into a tool.call or
// approval.requested event: an event travels inline on the messages its
// worker sends and is published as one NATS message, so a call whose
// arguments near the max payload (a helper's task of megabytes) must not
// make it too large. The call, the approval request and the journal keep
// them all.
const maxEventArguments = 64 << 10

// callTools runs one response's tool calls, all at once when the agent allows
// parallel calls and one by one otherwise, and returns their outputs in call
// order. target is the agent a transfer_to_<name> call handed off to, if any:
// the first such call wins. Every failure is a result text, never an error.
// A call whose result is journaled is not run again; one that is run is
// journaled once it answers (unless the thread is being cancelled: that
// answer is an artefact of the cancel, to be redone).
func (st *threadState) callTools(ctx context.Context, turn int, calls []model.ToolCall) (outputs []string, target string) {
	outputs = make([]string, len(calls))
	for i, c := range calls {
		name, ok := st.tools.handoffs[c.Name]
		if !ok {
			continue
		}
		if target == "" {
			target = name
			outputs[i] = "Transferred to " + name + "."
		} else {
			outputs[i] = "Ignored: the conversation is already being transferred to " + target + "."
		}
		if !st.replaying(turn) {
			st.record(journal.Entry{Kind: journal.KindTool, Turn: turn, CallID: c.ID, Tool: c.Name, Arguments: c.Arguments,
				Result: outputs[i], ToolStatus: journal.ToolOK})
		}
	}
	over := st.overCalls(calls)
	// An agent call waits on its helper as data (the Spawner's); any other
	// call runs on a goroutine of its own.
	ended := make(chan *agentCall, len(calls))
	helpers := 0
	var wg sync.WaitGroup
	start := func(i int) {
		switch c := calls[i]; {
		case over[i]:
			outputs[i] = st.refuseCall(ctx, turn, c)
		case st.spawns(c):
			st.startAgentCall(ctx, turn, i, c, ended)
			helpers++
		default:
			wg.Go(func() { outputs[i] = st.perform(ctx, turn, c) })
		}
	}
	wait := func() {
		for ; helpers > 0; helpers-- {
			ac := <-ended
			outputs[ac.i] = st.endAgentCall(turn, calls[ac.i], ac)
		}
		wg.Wait()
	}
	// Journaled results are taken first. Calls one by one are announced as
	// each runs; parallel calls are announced in order before any runs, so
	// watchers know the order the model asked for them in (siblings show in
	// call order).
	parallel := st.agent.ParallelCalls()
	var run []int
	for i, c := range calls {
		if _, isHandoff := st.tools.handoffs[c.Name]; isHandoff {
			continue
		}
		if out, ok := st.journaledResult(turn, c); ok {
			outputs[i] = out
			continue
		}
		st.announce(c)
		if parallel {
			run = append(run, i)
			continue
		}
		start(i)
		wait()
	}
	for _, i := range run {
		start(i)
	}
	wait()
	return outputs, target
}

// spawns says whether c is a call of the agent tool.
func (st *threadState) spawns(c model.ToolCall) bool {
	_, ok := st.tools.byName[c.Name].(agentTool)
	return ok
}

// startAgentCall starts agent call c, the i-th of its turn; it is sent on
// ended once its helper has ended (at once, with bad arguments).
func (st *threadState) startAgentCall(ctx context.Context, turn, i int, c model.ToolCall, ended chan<- *agentCall) {
	ac := &agentCall{i: i, cs: st.startCall(ctx, c), ended: ended}
	if out, ok := st.startSpawn(ac.cs.ctx, turn, c.ID, toolArgs(c), ac); !ok {
		ac.bad = out
		ac.Ended(thread.Result{}, nil)
	}
}

// overCalls marks the tool calls of one model response past the runner's
// MaxToolCalls (handoffs, which run nothing, are not counted): they run
// nothing, an agent call among them starts no helper (DESIGN: a bad call
// spawns nothing and uses no slot), and each one's result says why
// (OverCapText), so the model can ask again for fewer. What a turn's
// calls hold on the worker and, for helpers, on its coordinator (a
// goroutine or a spawn request in flight, a helper's record, a journal
// entry) is thus bounded by the cap, whatever the model asked.
func (st *threadState) overCalls(calls []model.ToolCall) []bool {
	over := make([]bool, len(calls))
	n := 0
	for i, c := range calls {
		if _, isHandoff := st.tools.handoffs[c.Name]; isHandoff {
			continue
		}
		n++
		over[i] = n > st.r.cfg.MaxToolCalls
	}
	return over
}

// OverCapText is the result of a tool call past a turn's cap of max calls.
func OverCapText(max int) string {
	return fmt.Sprintf("Error: not run: only the first %d tool calls of a turn run. "+
		"Make this call in a later turn, or do without it.", max)
}

// refuseCall answers call c of turn, past the turn's cap, without running
// it (an agent call starts no helper).
func (st *threadState) refuseCall(ctx context.Context, turn int, c model.ToolCall) string {
	cs := st.startCall(ctx, c)
	cs.hc.unrun = true
	return st.endCall(&cs, turn, c, OverCapText(st.r.cfg.MaxToolCalls), journal.ToolError)
}

// endAgentCall ends agent call c as perform ends any call.
func (st *threadState) endAgentCall(turn int, c model.ToolCall, ac *agentCall) string {
	if ac.bad != "" {
		ac.cs.hc.unrun = true
		return st.endCall(&ac.cs, turn, c, ac.bad, journal.ToolError)
	}
	out, status := st.spawnEnded(ac)
	return st.endCall(&ac.cs, turn, c, out, status)
}

// journaledResult returns the journaled result of call c of turn while the thread
// replays that turn. A call that had not answered is done again, and the
// journal's later turns no longer apply.
func (st *threadState) journaledResult(turn int, c model.ToolCall) (string, bool) {
	if !st.replaying(turn) {
		return "", false
	}
	if e, ok := st.replay.ToolResult(turn, c.ID); ok {
		st.addHelper(e.Usage)
		return e.Result, true
	}
	st.diverge(turn)
	return "", false
}

// announce emits a call's tool.call event.
func (st *threadState) announce(c model.ToolCall) {
	e := st.th.Event(event.ToolCall)
	e.Tool, e.CallID, e.Arguments = c.Name, c.ID, event.Clip(c.Arguments, maxEventArguments)
	st.r.emit(e)
}

// perform executes an announced call, journals it and emits its tool.result.
func (st *threadState) perform(ctx context.Context, turn int, c model.ToolCall) string {
	cs := st.startCall(ctx, c)
	out, status := st.execute(cs.ctx, turn, c)
	return st.endCall(&cs, turn, c, out, status)
}

// callStart is a call from its start to its end: when it started, its
// span and context, and what its helper spent.
type callStart struct {
	ctx   context.Context
	span  trace.Span
	start time.Time
	hc    helperCall
}

// startCall starts call c's span.
func (st *threadState) startCall(ctx context.Context, c model.ToolCall) callStart {
	cs := callStart{start: st.r.cfg.Now()}
	cs.ctx, cs.span = tracing.StartTool(ctx, c.Name, c.ID, c.Arguments)
	return cs
}

// endCall ends call c, which answered out (status): its span, its
// journal entry and its tool.result.
func (st *threadState) endCall(cs *callStart, turn int, c model.ToolCall, out, status string) string {
	tracing.EndTool(cs.span, outcomeOf(status), out)
	if obs := st.r.cfg.Observer; obs != nil {
		obs.ToolCall(c.Name, outcomeOf(status), st.r.cfg.Now().Sub(cs.start))
	}
	if cs.ctx.Err() == nil {
		st.recordCall(turn, c, out, status, st.r.cfg.Now().Sub(cs.start), &cs.hc)
	}
	st.toolResult(c, out, status)
	return out
}

// recordCall journals call c of turn, which answered out (status) after d.
func (st *threadState) recordCall(turn int, c model.ToolCall, out, status string, d time.Duration, hc *helperCall) {
	// A helper's tokens go with the result: reused, they count again.
	st.record(journal.Entry{Kind: journal.KindTool, Turn: turn, CallID: c.ID, Tool: c.Name, Arguments: c.Arguments,
		Result: out, ToolStatus: status, DurationMS: d.Milliseconds(), Usage: hc.usage}) // stored before the next model call sees it
	if !hc.succeeded && !hc.unrun {
		// Sent now, not held: sibling calls may run long, and a
		// result stored is a call not run again. A helper that
		// succeeded sent its end before its result, and a call that
		// asks for it again is answered with that result (from the
		// coordinator, or from the end in a later execution of the
		// run), so its entry can go with the next one sent; a call
		// that ran nothing costs nothing to answer again.
		st.j.Flush()
	}
}

// toolResult emits call c's tool.result event.
func (st *threadState) toolResult(c model.ToolCall, out, status string) {
	e := st.th.Event(event.ToolResult)
	e.Tool, e.CallID, e.InDoubt = c.Name, c.ID, status == journal.ToolInDoubt
	e.Output = event.Clip(out, maxEventOutput)
	st.r.emit(e)
}

// execute runs call c of turn through the permission gate and the
// CallGuard. An agent call is the loop's own and never comes here
// (startAgentCall).
func (st *threadState) execute(ctx context.Context, turn int, c model.ToolCall) (string, string) {
	if out, in, again := st.inDoubt(ctx, turn, c); in && !again {
		return out, journal.ToolInDoubt
	}
	t, ok := st.tools.byName[c.Name]
	if !ok {
		return fmt.Sprintf("Error: unknown tool %q. Available tools: %s.", c.Name, strings.Join(tools.Names(st.tools.visible), ", ")), journal.ToolError
	}
	args := toolArgs(c)
	if verdict, allowed := st.gate(ctx, turn, c.ID, t, c.Name, args); !allowed {
		return verdict, journal.ToolDenied
	}
	// Asked last, right before the side effect: an approval may have
	// waited long enough for the thread's placement to lapse.
	if guard := st.r.cfg.CallGuard; guard != nil {
		if err := guard(ctx, st.th); err != nil {
			return "Error: " + err.Error(), journal.ToolNotRun
		}
	}
	if st.once.OnceOnly(c.Name) {
		if err := st.startOnce(ctx, turn, c); err != nil {
			return "Error: the call was not run: " + err.Error(), journal.ToolNotRun
		}
	}
	out, err := t.Run(ctx, args)
	if err != nil {
		return "Error: " + err.Error(), journal.ToolError
	}
	return out, journal.ToolOK
}

// gate applies the thread's permission stack. A denied call returns the text
// the model sees instead of the tool's output.
func (st *threadState) gate(ctx context.Context, turn int, callID string, t tools.Tool, name string, args json.RawMessage) (string, bool) {
	subject := ""
	if s, ok := t.(tools.Subjecter); ok {
		subject = s.Subject(args)
	}
	switch st.permStack.Decide(name, subject) {
	case policy.Allow:
		return "", true
	case policy.Ask:
		return st.ask(ctx, turn, callID, name, args)
	}
	return tools.DeniedText(name), false
}

func (st *threadState) ask(ctx context.Context, turn int, callID, name string, args json.RawMessage) (string, bool) {
	// Decided before the thread ran again: nobody is asked twice.
	d, decided := st.replay.Approval(turn, callID)
	allow, reason := d.Allow, d.Reason
	if !decided {
		ap := st.approve(ctx, turn, callID, policy.ApprovalRequest{RunID: st.th.RunID, ThreadID: st.th.ID, ThreadPath: st.th.Path,
			Tool: name, Arguments: string(args), CallID: journal.CallKey(turn, callID)})
		allow, reason = ap.Allow, ap.Reason
	}
	if !allow {
		return tools.NotApprovedText(name, reason), false
	}
	return "", true
}

// approve asks the run's approver req about call callID of turn, with its
// events, and journals the decision. An approver that could not be asked
// denies, and nothing is journaled: a failure to ask is no decision to keep.
func (st *threadState) approve(ctx context.Context, turn int, callID string, req policy.ApprovalRequest) policy.Approval {
	e := st.th.Event(event.ApprovalRequested)
	e.Tool, e.Arguments, e.InDoubt = req.Tool, event.Clip(req.Arguments, maxEventArguments), req.InDoubt
	st.r.emit(e)
	tracing.AddEvent(ctx, tracing.EventApprovalRequested, tracing.AttrToolName.String(req.Tool))

	ap, err := st.r.cfg.Approver.Approve(ctx, req)
	decided := err == nil
	if err != nil {
		ap = policy.Approval{Reason: err.Error()}
	}
	e = st.th.Event(event.ApprovalResolved)
	e.Tool, e.Reason, e.Decision = req.Tool, ap.Reason, "deny"
	if ap.Allow {
		e.Decision = "allow"
	}
	tracing.AddEvent(ctx, tracing.EventApprovalResolved, tracing.AttrToolName.String(req.Tool), attribute.String("decision", e.Decision))
	st.r.emit(e)
	if decided && ctx.Err() == nil {
		st.record(journal.Entry{Kind: journal.KindApproval, Turn: turn, CallID: callID, Tool: req.Tool, Arguments: req.Arguments,
			Allow: ap.Allow, Reason: ap.Reason, InDoubt: req.InDoubt})
		st.j.Flush() // sent now: the call may run long, and nobody is to be asked twice
	}
	return ap
}

// outcomeOf is the Observer's word for a journaled tool call status.
func outcomeOf(status string) string {
	switch status {
	case journal.ToolDenied:
		return ToolDenied
	case journal.ToolError, journal.ToolNotRun, journal.ToolInDoubt:
		return ToolError
	}
	return ToolOK
}

// toolArgs is call c's arguments; none is an empty object.
func toolArgs(c model.ToolCall) json.RawMessage {
	if strings.TrimSpace(c.Arguments) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(c.Arguments)
}
