package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"go.opentelemetry.io/otel/trace"
)

// RunThread runs one thread's agent loop to its end; th is read, never
// changed. It never panics on bad model output or failing tools: every way
// a thread can end is a Result.
//
// It emits the thread's own events (model and tool calls, approvals,
// handoffs) but not thread.started or thread.finished: those belong to
// whoever placed the thread, which alone knows where it runs and how it
// ended: the coordinator, for a worker's threads.
func (r *Runner) RunThread(ctx context.Context, th *thread.Thread) thread.Result {
	if r.cfg.MCP != nil {
		defer r.cfg.MCP.Hold(th.RunID)()
	}
	st := &threadState{r: r, th: th, ctx: ctx}
	res, fromJournal, over := st.begin()
	if !over {
		res = st.loop(ctx)
	}
	return st.finish(ctx, res, fromJournal)
}

// finish journals the end of a thread that did not end in its journal.
func (st *threadState) finish(ctx context.Context, res thread.Result, fromJournal bool) thread.Result {
	res.Usage, res.Own = st.usages()
	if !fromJournal {
		st.record(journal.Entry{Kind: journal.KindEnd, Status: res.Status, Output: res.Output, Error: res.Error,
			Usage: res.Usage, Own: res.Own})
		st.endWritten(ctx)
	}
	return res
}

// threadState is one thread's conversation and current agent.
type threadState struct {
	r  *Runner
	th *thread.Thread

	agent     *spec.Agent // the thread's own, or a handoff target's copy
	ref       model.Ref
	mdl       model.Model
	tools     *toolset // shared: never changed, only replaced
	schema    *compiledSchema
	messages  []model.Message
	permStack policy.Permissions
	// once is the at-most-once rule in force (once.go): the thread's
	// agent's, with every handoff target's added.
	once spec.Harness
	// handedTo is every agent the thread handed off to, in order.
	handedTo []string
	// ctx is the thread's context, for what become starts (MCP servers);
	// mcpVersion the MCP tool lists' version the visible tools were built at.
	ctx        context.Context
	mcpVersion uint64

	j      ThreadJournal
	replay *journal.Replay
	// ratio corrects the context estimate by the provider's reported
	// input tokens (context.go); 0 is none yet.
	ratio float64

	startMu     sync.Mutex // one start of an at-most-once call stored at a time (startOnce)
	mu          sync.Mutex
	own         model.Usage // this thread's model calls
	helpers     model.Usage // every helper's subtree
	unsynced    bool        // entries appended since the last sync
	replayTurns int         // turns still answered from the journal
}

func (st *threadState) addOwn(u model.Usage) {
	st.mu.Lock()
	st.own = st.own.Add(u)
	st.mu.Unlock()
}

func (st *threadState) addHelper(u model.Usage) {
	st.mu.Lock()
	st.helpers = st.helpers.Add(u)
	st.mu.Unlock()
}

// usages returns the subtree's total and the thread's own part of it.
func (st *threadState) usages() (total, own model.Usage) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.own.Add(st.helpers), st.own
}

// begin replays the journal and becomes the thread's agent; over says the
// thread ended already, with res (fromJournal: it had finished before).
func (st *threadState) begin() (res thread.Result, fromJournal, over bool) {
	st.startReplay()
	if res, ok := st.finishedBefore(); ok {
		return res, true, true
	}
	st.permStack = st.th.Permissions
	st.once.AddOnce(&st.th.Agent.Harness)
	if err := st.become(&st.th.Agent); err != nil {
		return failed(err), false, true
	}
	st.messages = append(st.messages, model.Message{Role: model.RoleUser, Content: st.th.Task})
	if !st.replay.Started() {
		st.recordStart()
	}
	return thread.Result{}, false, false
}

// recordStart journals the thread's start. Nothing depends on it being
// stored: it goes with the first model response, or on its own if that
// response is slow.
func (st *threadState) recordStart() {
	a := *st.agent
	st.recordLazy(journal.Entry{Kind: journal.KindStart, Thread: threadInfo(st.th), System: st.messages[0].Content,
		Task: st.th.Task, Spec: &a, Model: st.ref.String()})
}

// finishedBefore is the result of a thread whose journal holds its end.
func (st *threadState) finishedBefore() (thread.Result, bool) {
	end, ok := st.replay.Finished()
	if !ok {
		return thread.Result{}, false
	}
	st.own, st.helpers = end.Own, subUsage(end.Usage, end.Own)
	return thread.Result{Status: end.Status, Output: end.Output}, true
}

func (st *threadState) loop(ctx context.Context) thread.Result {
	maxTurns := st.agent.Turns()
	schemaRetried := false
	for turn := 0; ; turn++ {
		if err := ctx.Err(); err != nil {
			return thread.Cancelled(ctx)
		}
		if turn >= maxTurns {
			return failed(fmt.Errorf("%w (%d)", ErrMaxTurns, maxTurns))
		}
		st.refreshMCP()
		if res, over := st.makeRoom(ctx, turn); over {
			return res
		}
		resp, fromJournal := st.replayed(turn)
		if !fromJournal {
			// The tool results this call sees are stored first.
			if err := st.sync(ctx); err != nil {
				return failed(err)
			}
			var err error
			if resp, err = st.generate(ctx, turn); err != nil {
				return modelFailed(ctx, err)
			}
		}
		st.learn(resp.Usage)
		st.messages = append(st.messages, model.Message{Role: model.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls, Reasoning: resp.Reasoning})
		if len(resp.ToolCalls) == 0 {
			if res, over := st.final(resp.Text, turn, fromJournal, &schemaRetried); over {
				return res
			}
			continue
		}
		if !fromJournal {
			// The response is stored before its tool calls run.
			if err := st.sync(ctx); err != nil {
				return failed(err)
			}
		}
		outputs, target := st.callTools(ctx, turn, resp.ToolCalls)
		if res, over := st.toolsAnswered(ctx, turn, resp.ToolCalls, outputs, target, fromJournal); over {
			return res
		}
	}
}

// modelFailed is how a thread ends when its model call failed with err.
func modelFailed(ctx context.Context, err error) thread.Result {
	if ctx.Err() != nil {
		return thread.Cancelled(ctx)
	}
	var spent *limits.Exhausted
	if errors.As(err, &spent) {
		return failed(spent)
	}
	if errors.Is(err, limits.ErrUnpriced) {
		return failed(err)
	}
	return failed(fmt.Errorf("model error: %w", err))
}

// final takes an answer without tool calls: the thread's result, or, once,
// a correction when it does not meet the output schema (over false).
func (st *threadState) final(text string, turn int, fromJournal bool, schemaRetried *bool) (res thread.Result, over bool) {
	if st.schema == nil {
		return thread.Result{Status: event.Succeeded, Output: text}, true
	}
	out, verr := st.schema.check(text)
	if verr == nil {
		return thread.Result{Status: event.Succeeded, Output: out}, true
	}
	if *schemaRetried {
		return failed(fmt.Errorf("%w: %v", ErrSchema, verr)), true
	}
	*schemaRetried = true
	fix := correction(verr)
	if !fromJournal {
		st.record(journal.Entry{Kind: journal.KindCorrection, Turn: turn, Content: fix})
	}
	st.messages = append(st.messages, model.Message{Role: model.RoleUser, Content: fix})
	return thread.Result{}, false
}

// toolsAnswered adds the tool results to the conversation and hands off
// to target if a call asked for it; over says the thread ends with res.
func (st *threadState) toolsAnswered(ctx context.Context, turn int, calls []model.ToolCall, outputs []string, target string, fromJournal bool) (res thread.Result, over bool) {
	for i, c := range calls {
		st.messages = append(st.messages, model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: outputs[i]})
	}
	if ctx.Err() != nil {
		return thread.Cancelled(ctx), true
	}
	if target != "" {
		tracing.Handoff(ctx, target, st.agent.Name, st.th.ID)
		if err := st.handoff(target); err != nil {
			return failed(err), true
		}
		if !fromJournal {
			st.record(journal.Entry{Kind: journal.KindHandoff, Turn: turn, Target: target, System: st.messages[0].Content})
		}
	}
	return thread.Result{}, false
}

// generate makes the thread's model call of turn and journals it.
func (st *threadState) generate(ctx context.Context, turn int) (model.Response, error) {
	resp, latency, err := st.callModel(ctx, model.Request{
		Model:             st.ref.Name,
		Messages:          st.messages,
		Tools:             st.tools.schemas,
		Args:              st.agent.ModelArgs,
		ParallelToolCalls: st.agent.ParallelCalls(),
		CacheKey:          st.th.ID,
	})
	if err == nil {
		st.record(journal.Entry{Kind: journal.KindModel, Turn: turn, Model: st.ref.String(), Usage: resp.Usage, LatencyMS: latency.Milliseconds(),
			Message: &model.Message{Role: model.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls}})
	}
	return resp, err
}

// callModel makes one model call of the thread, its turn's or a summary's: it
// checks the budget first, then accounts the call (accountCall) whatever it
// was for. What it holds while the model answers is small: a thread waits
// here for most of its life.
func (st *threadState) callModel(ctx context.Context, req model.Request) (model.Response, time.Duration, error) {
	meter := meterFrom(ctx)
	if meter != nil {
		if err := meter.Before(ctx, st.estimateCost(req)); err != nil {
			return model.Response{}, 0, err
		}
	}
	start := st.r.cfg.Now()
	notice := &callNotice{st: st, inner: model.QuotaNoticeFrom(ctx)}
	ctx = model.WithRetryNotice(ctx, notice)
	ctx = model.WithCaller(ctx, model.Caller{Run: st.th.RunID, Thread: st.th.ID})
	ctx = model.WithQuotaNotice(ctx, notice)
	ctx, span := tracing.StartChat(ctx, st.ref.Provider, st.ref.Name)
	resp, err := st.mdl.Generate(ctx, req)
	notice.ended()
	latency := st.r.cfg.Now().Sub(start)
	st.accountCall(span, meter, &resp, latency, err)
	return resp, latency, err
}

// accountCall accounts a model call that ended: the thread's usage and
// budget, the event model.call, its trace span and the metrics.
func (st *threadState) accountCall(span trace.Span, meter Meter, resp *model.Response, latency time.Duration, err error) {
	e := st.th.Event(event.ModelCall)
	e.Model = st.ref.String()
	e.Latency = event.Duration(latency)
	if err != nil {
		e.Reason = err.Error()
	} else {
		e.Usage = resp.Usage
		st.addOwn(resp.Usage)
		if meter != nil {
			meter.After(resp.Usage)
		}
	}
	st.r.emit(e)
	tracing.EndChat(span, resp.ID, cmp.Or(resp.Model, st.ref.Name), resp.StopReason, e.Usage.InputTokens, e.Usage.OutputTokens, err)
	if obs := st.r.cfg.Observer; obs != nil {
		obs.ModelCall(st.ref.Provider, st.ref.Name, latency, e.Usage.InputTokens, e.Usage.OutputTokens, err)
	}
}

// become makes a the thread's current agent: its model, tools and system prompt.
func (st *threadState) become(a *spec.Agent) error {
	refText := cmp.Or(a.Model, st.r.cfg.DefaultModel)
	ref, err := model.ParseRef(refText)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	mdl, err := st.r.model(refText)
	if err != nil {
		return fmt.Errorf("agent %s: open model %s: %w", a.Name, refText, err)
	}
	if st.r.cfg.MCP != nil {
		st.mcpVersion = st.r.cfg.MCP.Version()
	}
	ts, err := st.r.toolsFor(st.ctx, st.th, a)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	var schema *compiledSchema
	if len(a.OutputSchema) > 0 {
		if schema, err = st.r.compileSchema(a.OutputSchema); err != nil {
			return fmt.Errorf("agent %s: %w", a.Name, err)
		}
	}
	st.agent, st.ref, st.mdl, st.tools, st.schema = a, ref, mdl, ts, schema
	system := model.Message{Role: model.RoleSystem, Content: systemPrompt(a, schema)}
	if len(st.messages) == 0 {
		st.messages = append(st.messages, system)
	} else {
		st.messages[0] = system
	}
	return nil
}

func failed(err error) thread.Result { return thread.Failed(err.Error()) }

// subUsage is a - b, never below zero.
func subUsage(a, b model.Usage) model.Usage {
	return model.Usage{InputTokens: max(0, a.InputTokens-b.InputTokens), OutputTokens: max(0, a.OutputTokens-b.OutputTokens)}
}

// refreshMCP lists the agent's tools again when an MCP server said its tool
// list changed since they were built; a failed listing keeps the old tools.
func (st *threadState) refreshMCP() {
	m := st.r.cfg.MCP
	if m == nil || len(st.agent.Harness.MCP) == 0 || m.Version() == st.mcpVersion {
		return
	}
	st.mcpVersion = m.Version()
	ts, err := st.r.toolsFor(st.ctx, st.th, st.agent)
	if err != nil {
		st.r.cfg.Logger.Warn("MCP tools not refreshed", "run_id", st.th.RunID, "thread_id", st.th.ID, "err", err)
		return
	}
	st.tools = ts
}
