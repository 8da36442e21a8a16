package runner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/thread"
)

// The context window (docs/agent-specs.md, "Context window"). Before each
// model call a thread estimates its request's tokens: its bytes (every
// message's text, tool calls and reasoning, with a few bytes of framing
// each, and the tool schemas) over bytesPerToken, times the thread's
// ratio, which the provider's reported input tokens of the previous call
// set (clamped to [minRatio, maxRatio], so a server that reports nonsense
// cannot make the thread blind). When the estimate passes roomAt of the
// window the thread makes room, in one large step down to roomTo, so that
// most requests extend the previous one unchanged (what a provider's
// prompt cache needs):
//
//  1. it elides old tool results, oldest first: each becomes a marker
//     saying what was removed and how to get it again
//     (journal.ElisionMarker); results under minElideBytes are kept;
//  2. if that is not enough, it replaces the oldest part of the
//     conversation after the task, whole turns, by a summary made by one
//     call to its own model.
//
// The system prompt, the task and the most recent turn (the last
// assistant message and what follows it) are never touched, and a tool
// call's result goes only with its call. A message that alone is larger
// than the window fails the thread before any call is sent, as does a
// conversation that still does not fit after making room.
//
// Both steps are journal entries (journal.KindElision, KindSummary) that
// journal.Apply carries out, so a thread that runs again applies the same
// ones at the same turns and sends the same requests, and transcripts show
// them in place.
const (
	roomAt        = 0.80
	roomTo        = 0.50
	bytesPerToken = 4
	// messageFraming is what the estimate counts for a message's role and
	// separators.
	messageFraming = 16
	minElideBytes  = 1024
	// minRatio and maxRatio bound the correction of the byte estimate.
	minRatio, maxRatio = 0.5, 4.0
)

// messageBytes is the size the estimate counts for m.
func messageBytes(m *model.Message) int {
	n := messageFraming + len(m.Content) + len(m.ToolCallID) + len(m.ToolName)
	for _, c := range m.ToolCalls {
		n += messageFraming + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	for _, r := range m.Reasoning {
		n += len(r.Text) + len(r.Signature) + len(r.Redacted)
	}
	return n
}

// requestBytes is the size the estimate counts for a request of msgs
// offering tools.
func requestBytes(msgs []model.Message, tools []model.ToolSchema) int {
	n := 0
	for i := range msgs {
		n += messageBytes(&msgs[i])
	}
	for _, t := range tools {
		n += messageFraming + len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}

// estimate is the thread's estimate of the tokens of bytes.
func (st *threadState) estimate(bytes int) int64 {
	r := cmp.Or(st.ratio, 1)
	return int64(math.Ceil(float64((bytes+bytesPerToken-1)/bytesPerToken) * r))
}

// learn corrects the estimate by u, the usage of a call that sent the
// thread's current conversation.
func (st *threadState) learn(u model.Usage) {
	raw := (requestBytes(st.messages, st.tools.schemas) + bytesPerToken - 1) / bytesPerToken
	if u.InputTokens <= 0 || raw <= 0 {
		return
	}
	st.ratio = min(max(float64(u.InputTokens)/float64(raw), minRatio), maxRatio)
}

// contextWindow is the current agent's window in tokens; 0 is no limit.
func (st *threadState) contextWindow() int64 {
	if st.agent.ContextWindow > 0 {
		return st.agent.ContextWindow
	}
	return model.Window(st.ref)
}

// roomFromJournal reports whether the journal's compactions of turn are
// reused: those of a turn replayed, and of the turn in flight when the
// thread stopped (unless replay stopped earlier, when they may not fit).
func (st *threadState) roomFromJournal(turn int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return turn < st.replayTurns || (turn == st.replayTurns && st.replayTurns == st.replay.Turns())
}

// makeRoom keeps the request of turn inside the context window (see
// above); over says the thread ends with res.
func (st *threadState) makeRoom(ctx context.Context, turn int) (res thread.Result, over bool) {
	var done []journal.Kind
	if st.roomFromJournal(turn) {
		for _, e := range st.replay.Compactions(turn) {
			st.messages = journal.Apply(st.messages, e)
			st.addOwn(e.Usage)
			done = append(done, e.Kind)
		}
		if st.replaying(turn) {
			return thread.Result{}, false // the model saw what they made
		}
	}
	window := st.contextWindow()
	if window <= 0 {
		return thread.Result{}, false
	}
	for i := range st.messages {
		if n := st.estimate(messageBytes(&st.messages[i])); n > window {
			return failed(fmt.Errorf("%w: %s is about %d tokens, more than the model's whole context window (%d tokens); nothing was sent",
				ErrContextWindow, describeMessage(st.messages, i), n, window)), true
		}
	}
	bytes := requestBytes(st.messages, st.tools.schemas)
	before := st.estimate(bytes)
	if float64(before) <= roomAt*float64(window) {
		return thread.Result{}, false
	}
	low := int64(roomTo * float64(window))
	last := lastTurn(st.messages)
	if !slices.Contains(done, journal.KindElision) {
		bytes = st.elide(turn, last, bytes, low, window, before)
	}
	if st.estimate(bytes) > low && !slices.Contains(done, journal.KindSummary) && last > 2 {
		var err error
		if bytes, err = st.summarize(ctx, turn, last, bytes, low, window); err != nil {
			if ctx.Err() != nil {
				return thread.Cancelled(ctx), true
			}
			if st.estimate(bytes) > window {
				return failed(fmt.Errorf("%w: the conversation is about %d tokens and its summary failed: %v", ErrContextWindow, st.estimate(bytes), err)), true
			}
			st.r.cfg.Logger.Warn("context summary failed; going on without it", "run_id", st.th.RunID, "thread_id", st.th.ID, "err", err)
		}
	}
	if n := st.estimate(bytes); n > window {
		return failed(fmt.Errorf("%w: the conversation is still about %d tokens after making room, more than the model's context window (%d tokens); "+
			"the system prompt, the task and the latest turn are never dropped", ErrContextWindow, n, window)), true
	}
	return thread.Result{}, false
}

// elide replaces tool results before the latest turn (which starts at
// last), oldest first, by markers until the request's bytes estimate at
// most low tokens, journals what it did, and returns the bytes after.
func (st *threadState) elide(turn, last, bytes int, low, window, before int64) int {
	var elided []journal.Elided
	for i := 2; i < last && st.estimate(bytes) > low; i++ {
		m := &st.messages[i]
		if m.Role != model.RoleTool || len(m.Content) < minElideBytes || journal.IsElided(m.Content) {
			continue
		}
		el := journal.Elided{Index: i, CallID: m.ToolCallID, Tool: m.ToolName, Bytes: len(m.Content)}
		bytes += len(journal.ElisionMarker(el.Tool, el.CallID, el.Bytes)) - len(m.Content)
		elided = append(elided, el)
	}
	if len(elided) == 0 {
		return bytes
	}
	e := journal.Entry{Kind: journal.KindElision, Turn: turn, Elided: elided, Window: window, TokensBefore: before, TokensAfter: st.estimate(bytes)}
	st.messages = journal.Apply(st.messages, e)
	st.record(e)
	return bytes
}

// summaryPrompt is the system prompt of a summary call.
const summaryPrompt = "You compress the earlier part of an AI agent's conversation so that the agent can carry on " +
	"within its context window. Write a concise summary of the conversation part you are given: what was done, " +
	"which tools were called with which arguments and what they found (facts, numbers, file paths, names, errors), " +
	"decisions made, and what remains open. Say which results were elided. Write only the summary."

// summaryTokens is the output a summary may take of a window.
func summaryTokens(window int64) int64 { return min(max(window/20, 256), 2048) }

// summarize replaces the oldest whole turns after the task, enough of them
// to bring the request to about low tokens with the summary in their place
// (all before the latest turn at most), by a summary made by one call to
// the thread's model, journals it, and returns the request's bytes after.
func (st *threadState) summarize(ctx context.Context, turn, last, bytes int, low, window int64) (int, error) {
	allowance := int(summaryTokens(window)) * bytesPerToken
	end, removed := last, 0
	for j := 3; j <= last; j++ {
		removed += messageBytes(&st.messages[j-1])
		if st.messages[j].Role == model.RoleAssistant && st.estimate(bytes-removed+allowance) <= low {
			end = j
			break
		}
	}
	part := st.messages[2:end]
	text, u, latency, err := st.summaryCall(ctx, part, window)
	if err != nil {
		return bytes, err
	}
	before := st.estimate(bytes)
	e := journal.Entry{Kind: journal.KindSummary, Turn: turn, Summarized: len(part), Content: text, Model: st.ref.String(),
		Usage: u, LatencyMS: latency.Milliseconds(), Window: window, TokensBefore: before}
	msgs := journal.Apply(st.messages, e)
	bytes = requestBytes(msgs, st.tools.schemas)
	e.TokensAfter = st.estimate(bytes)
	st.messages = msgs
	st.record(e)
	return bytes, nil
}

// summaryCall asks the thread's model for a summary of part, accounted
// like any model call of the thread (budget, usage, event).
func (st *threadState) summaryCall(ctx context.Context, part []model.Message, window int64) (string, model.Usage, time.Duration, error) {
	args := st.agent.ModelArgs.Merge(nil)
	key := "max_tokens"
	if _, ok := args["max_completion_tokens"]; ok {
		key = "max_completion_tokens"
	}
	if args == nil {
		args = model.Args{}
	}
	args[key] = summaryTokens(window)
	// The part is shown within half the window, each message cut to its share.
	room := int(float64(window)*roomTo/max(st.ratio, 1)) * bytesPerToken
	resp, latency, err := st.callModel(ctx, model.Request{
		Model: st.ref.Name,
		Messages: []model.Message{{Role: model.RoleSystem, Content: summaryPrompt},
			{Role: model.RoleUser, Content: renderPart(st.th.Task, part, room)}},
		Args: args,
	})
	if err == nil && strings.TrimSpace(resp.Text) == "" {
		err = fmt.Errorf("the model gave an empty summary")
	}
	return strings.TrimSpace(resp.Text), resp.Usage, latency, err
}

// renderPart shows the conversation part to summarize as text of about
// room bytes at most.
func renderPart(task string, part []model.Message, room int) string {
	each := max(room/max(len(part), 1)-64, 256)
	cut := func(s string) string {
		if len(s) <= each {
			return s
		}
		return fmt.Sprintf("%s ... [%d bytes cut]", s[:each], len(s)-each)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The agent's task (kept, do not summarize it):\n%s\n\nThe conversation part to summarize:\n", cut(task))
	for _, m := range part {
		switch m.Role {
		case model.RoleTool:
			fmt.Fprintf(&b, "\n[result of %s call %s]\n%s\n", m.ToolName, m.ToolCallID, cut(m.Content))
		case model.RoleAssistant:
			if m.Content != "" {
				fmt.Fprintf(&b, "\n[assistant]\n%s\n", cut(m.Content))
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "\n[assistant calls %s, call %s]\n%s\n", c.Name, c.ID, cut(c.Arguments))
			}
		default:
			fmt.Fprintf(&b, "\n[%s]\n%s\n", m.Role, cut(m.Content))
		}
	}
	return b.String()
}

// lastTurn is the index of the last assistant message (where the most
// recent turn starts), or 2 if there is none: nothing after the task may
// then be compacted.
func lastTurn(msgs []model.Message) int {
	for i := len(msgs) - 1; i >= 2; i-- {
		if msgs[i].Role == model.RoleAssistant {
			return i
		}
	}
	return 2
}

// describeMessage names message i of msgs for an error.
func describeMessage(msgs []model.Message, i int) string {
	m := &msgs[i]
	switch {
	case i == 0:
		return "the system prompt"
	case i == 1:
		return "the task"
	case m.Role == model.RoleTool:
		return fmt.Sprintf("the result of %s call %s", m.ToolName, m.ToolCallID)
	}
	return fmt.Sprintf("message %d (%s)", i, m.Role)
}
