package runner

import (
	"cmp"
	"context"
	"fmt"
	"strconv"

	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

// Calls of the tools a thread's harness names in at_most_once
// (spec.Harness.OnceOnly) are journaled as started, and the start stored,
// before they run. A thread that runs again after a failure and finds a
// start with no result after it does not run that call again: the call is
// in doubt. The model is told so (InDoubtText), unless the harness says
// in_doubt: ask and a person allows the call to run again. Every other
// call in flight at a failure runs again: at least once.

// InDoubtText is the tool result of a call of tool found in doubt; reason,
// when set, says who decided not to run it again.
func InDoubtText(tool, reason string) string {
	text := fmt.Sprintf("Tool call in doubt: this %s call was interrupted by a failure (a crash or a lost machine) "+
		"before its result was recorded, so it may or may not have taken effect. It was not run again, because %s "+
		"calls must not run twice.", tool, tool)
	if reason != "" {
		text += " (" + reason + ")"
	}
	return text + " Check whether its effect happened before you do it again."
}

// startOnce journals call c of turn as started and waits until that is
// stored: only then may the call run. One start is stored at a time: a
// Sync reports the writes it waited for, and one running beside another
// could find this start already taken and return before it is stored.
func (st *threadState) startOnce(ctx context.Context, turn int, c model.ToolCall) error {
	st.startMu.Lock()
	defer st.startMu.Unlock()
	st.record(journal.Entry{Kind: journal.KindTool, Turn: turn, CallID: c.ID, Tool: c.Name, Arguments: c.Arguments,
		ToolStatus: journal.ToolStarted})
	if err := st.j.Sync(ctx); err != nil {
		return fmt.Errorf("its start could not be journaled, and %s calls must not run twice: %w", c.Name, err)
	}
	return nil
}

// inDoubt settles call c of turn if the journal has it in doubt: again
// says it runs again (a person allowed it); otherwise, when in doubt, out
// is what the model gets instead of running it.
func (st *threadState) inDoubt(ctx context.Context, turn int, c model.ToolCall) (out string, in, again bool) {
	starts, ok := st.replay.InDoubt(turn, c.ID)
	if !ok {
		return "", false, false
	}
	if !st.once.AsksInDoubt() {
		return InDoubtText(c.Name, ""), true, false
	}
	// Each start asks anew: a call allowed again that is cut again is a
	// new question, never answered by the last decision.
	ap := st.approve(ctx, turn, c.ID, policy.ApprovalRequest{RunID: st.th.RunID, ThreadID: st.th.ID, ThreadPath: st.th.Path,
		Tool: c.Name, Arguments: string(toolArgs(c)), InDoubt: true,
		CallID: journal.CallKey(turn, c.ID) + "/in_doubt/" + strconv.Itoa(starts)})
	if ap.Allow {
		return "", true, true
	}
	return InDoubtText(c.Name, "asked whether to run it again: "+cmp.Or(ap.Reason, "denied")), true, false
}
