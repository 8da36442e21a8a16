package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/tracing"
)

var agentSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"name":{"type":"string","pattern":"^[A-Za-z0-9._-]{1,64}$","description":"One word naming the helper, for logs and the dashboard."},` +
	`"task":{"type":"string","minLength":1,"description":"The complete instruction. The helper sees only this, not your conversation."}},` +
	`"required":["name","task"],"additionalProperties":false}`)

// agentTool describes the `agent` tool to the model. Like a handoff, a
// call of it is acted on by the loop (startAgentCall), which knows the calling
// thread and the call; it is never run. It asks no permission (DESIGN
// rule 1).
type agentTool struct{}

func (agentTool) Name() string { return tools.AgentToolName }

func (agentTool) Description() string {
	return "Delegate a self-contained task to a fresh helper agent and wait for its final answer. " +
		"The helper sees only the task you give it. Call it several times in one turn to run helpers in parallel."
}

func (agentTool) Schema() json.RawMessage { return agentSchema }

func (agentTool) Run(context.Context, json.RawMessage) (string, error) {
	return "", errors.New("the agent tool is acted on by the loop, not run")
}

// helperCall is what an agent call's journal entry needs beside its
// result: what the helper's subtree spent, and whether the helper
// succeeded (then it sent its end before its result, and the entry need
// not be sent at once).
type helperCall struct {
	usage     model.Usage
	succeeded bool
	// unrun: the call ran nothing (bad arguments, past the turn's cap).
	unrun bool
}

// agentCall is an agent call while its helper runs (the SpawnCall the
// Spawner answers): its request, its place in its turn (i), its start (cs)
// and how its helper ended, sent on ended.
type agentCall struct {
	st     *threadState
	turn   int
	callID string
	req    SpawnRequest
	args   tools.AgentArgs
	res    thread.Result
	err    error
	i      int
	cs     callStart
	ended  chan<- *agentCall
	bad    string // the call's result when its arguments were bad
}

// Admitted journals the spawn. Nothing waits for it: it goes with the
// call's result, or on its own while the helper runs long.
func (ac *agentCall) Admitted(child string) {
	ac.st.recordLazy(journal.Entry{Kind: journal.KindSpawn, Turn: ac.turn, CallID: ac.callID, Name: ac.args.Name,
		Task: ac.args.Task, Child: child})
}

// Ended takes the helper's end.
func (ac *agentCall) Ended(res thread.Result, err error) {
	ac.res, ac.err = res, err
	ac.ended <- ac
}

// startSpawn asks the Spawner for agent call callID's helper, to end in
// ac: the runner's Spawner admits and runs the helper the arguments name,
// under the call's key (so the same call is always the same helper). False
// means the arguments are bad: out is the call's result, and ac does not
// end.
func (st *threadState) startSpawn(ctx context.Context, turn int, callID string, raw json.RawMessage, ac *agentCall) (out string, ok bool) {
	args, err := tools.ParseAgentArgs(raw)
	if err != nil {
		return "Error: " + err.Error(), false
	}
	var spent model.Usage
	if m := meterFrom(ctx); m != nil {
		spent = m.Park()
	}
	tracing.Transfer(ctx, tracing.TransferReturnToCaller, args.Name, st.agent.Name, st.th.ID)
	ac.st, ac.turn, ac.callID, ac.args = st, turn, callID, args
	ac.req = SpawnRequest{
		ParentSpent: spent,
		RunID:       st.th.RunID,
		ParentID:    st.th.ID,
		CallID:      journal.CallKey(turn, callID),
		Handoffs:    st.handedTo,
		Name:        args.Name,
		Task:        args.Task,
	}
	st.r.cfg.Spawner.Spawn(ctx, &ac.req, ac)
	return "", true
}

// spawnEnded is what the model sees of agent call ac's end.
// Refusals and helper failures are ordinary results, so the parent's model
// can carry on by itself.
func (st *threadState) spawnEnded(ac *agentCall) (out, status string) {
	var refusal *limits.Refusal
	switch {
	case errors.As(ac.err, &refusal):
		return st.refused(ac, refusal), journal.ToolOK
	case ac.err != nil:
		return helperFailed(ac.args.Name, ac.err.Error()), journal.ToolHelperFailed
	}
	res := &ac.res
	st.addHelper(res.Usage)
	hc := &ac.cs.hc
	hc.usage, hc.succeeded = res.Usage, res.Status == event.Succeeded
	if !hc.succeeded {
		return helperFailed(ac.args.Name, cmp.Or(res.Error, string(res.Status))), journal.ToolHelperFailed
	}
	return res.Output, journal.ToolOK
}

// refused journals agent call ac as refused and returns what the model
// sees.
func (st *threadState) refused(ac *agentCall, refusal *limits.Refusal) string {
	st.recordLazy(journal.Entry{Kind: journal.KindRefusal, Turn: ac.turn, CallID: ac.callID, Name: ac.args.Name, Task: ac.args.Task,
		Reason: string(refusal.Reason)})
	tracing.AddEvent(ac.cs.ctx, tracing.EventSpawnRefused, attribute.String("reason", string(refusal.Reason)))
	return refusal.Error()
}

// helperFailed is the tool result of a helper that did not succeed.
func helperFailed(name, reason string) string {
	return "Helper " + name + " failed: " + reason
}
