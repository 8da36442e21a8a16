package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/formica-run/formica/internal/tracing"
)

// recorder installs an in-memory provider for the test.
func recorder(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

func TestHeadersCrossAnyCase(t *testing.T) {
	recorder(t)
	ctx, span := tracing.StartTool(context.Background(), "agent", "call_1", "{}")
	defer span.End()
	h := tracing.Inject(ctx, map[string]string{"Formica-Run": "r1"})
	if h[tracing.HeaderTraceparent] == "" {
		t.Fatalf("no lower-case traceparent in %v", h)
	}
	// A peer that wrote the header in another case is read the same.
	upper := map[string]string{"Traceparent": h[tracing.HeaderTraceparent]}
	if got, want := tracing.TraceIDOf(upper), tracing.TraceID(ctx); got != want || got == "" {
		t.Fatalf("TraceIDOf(Traceparent) = %q, want %q", got, want)
	}
	carried := tracing.Carry(upper)
	if len(carried) != 1 || carried[tracing.HeaderTraceparent] != h[tracing.HeaderTraceparent] {
		t.Fatalf("Carry = %v", carried)
	}
	if tracing.Carry(map[string]string{"Formica-Run": "r1"}) != nil {
		t.Error("Carry of headers without trace context is not nil")
	}
	// Without a span nothing is added.
	if h := tracing.Inject(context.Background(), nil); h != nil {
		t.Errorf("Inject without a span = %v", h)
	}
}

func TestSpanNamesAndNesting(t *testing.T) {
	rec := recorder(t)
	ctx, agent := tracing.StartInvokeAgent(context.Background(), tracing.Agent{Name: "formica", ThreadID: "t1", RunID: "r1"})
	_, chat := tracing.StartChat(ctx, "sim", "")
	tracing.EndChat(chat, "chatcmpl-1", "", "stop", 3, 4, nil)
	tctx, tool := tracing.StartTool(ctx, "agent", "call_1", `{"task":"x"}`)
	// The helper, in another process, goes on from the carried header.
	remote := tracing.Extract(context.Background(), tracing.Inject(tctx, nil))
	_, helper := tracing.StartInvokeAgent(remote, tracing.Agent{Name: "a", ThreadID: "t2", RunID: "r1"})
	tracing.EndInvokeAgent(helper, 1, 1, "succeeded", "")
	tracing.EndTool(tool, "ok", "done")
	tracing.EndInvokeAgent(agent, 3, 4, "failed", "boom")

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	for _, name := range []string{"invoke_agent formica", "chat sim", "execute_tool agent", "invoke_agent a"} {
		if byName[name] == nil {
			t.Fatalf("no span %q among %v", name, byName)
		}
	}
	if got, want := byName["invoke_agent a"].Parent().SpanID(), byName["execute_tool agent"].SpanContext().SpanID(); got != want {
		t.Errorf("helper's parent %s, want the execute_tool span %s", got, want)
	}
	for _, kv := range byName["execute_tool agent"].Attributes() {
		if kv.Key == tracing.AttrToolArguments {
			t.Error("tool arguments on a span without the capture setting")
		}
	}
	chatAttrs := map[attribute.Key]string{}
	for _, kv := range byName["chat sim"].Attributes() {
		chatAttrs[kv.Key] = kv.Value.Emit()
	}
	if chatAttrs[tracing.AttrResponseID] != "chatcmpl-1" {
		t.Errorf("chat span's gen_ai.response.id %q, want chatcmpl-1", chatAttrs[tracing.AttrResponseID])
	}
	if byName["invoke_agent formica"].Status().Description != "boom" {
		t.Errorf("failed thread's span status %+v", byName["invoke_agent formica"].Status())
	}
}

// With no provider installed, spans cost nothing on the spawn path, and a
// trace that arrived from another process is still carried on.
func TestTracingOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		actx, agent := tracing.StartInvokeAgent(ctx, tracing.Agent{Name: "a", ThreadID: "t1", RunID: "r1"})
		cctx, chat := tracing.StartChat(actx, "sim", "")
		tracing.EndChat(chat, "", "", "stop", 1, 1, nil)
		_, tool := tracing.StartTool(cctx, "agent", "call_1", "{}")
		tracing.EndTool(tool, "ok", "done")
		tracing.EndInvokeAgent(agent, 1, 1, "succeeded", "")
	})
	if allocs != 0 {
		t.Errorf("untraced spans allocate %v times", allocs)
	}
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	remote := tracing.Extract(ctx, map[string]string{tracing.HeaderTraceparent: parent})
	tctx, tool := tracing.StartTool(remote, "agent", "call_1", "{}")
	defer tool.End()
	if got, want := tracing.TraceID(tctx), "0af7651916cd43dd8448eb211c80319c"; got != want {
		t.Errorf("carried trace %q, want %q", got, want)
	}
}

// A chat span carries the cached parts of its input and its cost when the
// call reports them.
func TestChatUsage(t *testing.T) {
	rec := recorder(t)
	ctx, chat := tracing.StartChat(context.Background(), "anthropic", "claude-sonnet-4-5")
	cost := 0.0123
	tracing.ChatUsage(ctx, 4000, 300, &cost)
	tracing.EndChat(chat, "", "", "end_turn", 4500, 20, nil)
	pctx, plain := tracing.StartChat(context.Background(), "sim", "")
	tracing.ChatUsage(pctx, 0, 0, nil)
	tracing.EndChat(plain, "", "", "stop", 3, 4, nil)
	got := map[string]map[attribute.Key]attribute.Value{}
	for _, s := range rec.Ended() {
		got[s.Name()] = map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			got[s.Name()][kv.Key] = kv.Value
		}
	}
	a := got["chat claude-sonnet-4-5"]
	if a[tracing.AttrCacheReadTokens].AsInt64() != 4000 || a[tracing.AttrCacheWriteTokens].AsInt64() != 300 ||
		a[tracing.AttrInputTokens].AsInt64() != 4500 || a[tracing.AttrCostUSD].AsFloat64() != cost {
		t.Errorf("chat span attributes %v", a)
	}
	for _, k := range []attribute.Key{tracing.AttrCacheReadTokens, tracing.AttrCacheWriteTokens, tracing.AttrCostUSD} {
		if _, ok := got["chat sim"][k]; ok {
			t.Errorf("%s on a call that reported none", k)
		}
	}
}

// An agent call's execute_tool span is a transfer that returns to its
// caller; a handoff is an event on the thread's span, passing control.
func TestTransfers(t *testing.T) {
	rec := recorder(t)
	ctx, agentSpan := tracing.StartInvokeAgent(context.Background(), tracing.Agent{Name: "lead", ThreadID: "t1"})
	tctx, toolSpan := tracing.StartTool(ctx, "agent", "c1", `{"name":"research"}`)
	tracing.Transfer(tctx, tracing.TransferReturnToCaller, "research", "lead", "t1")
	tracing.EndTool(toolSpan, "ok", "")
	tracing.Handoff(ctx, "writer", "lead", "t1")
	tracing.EndInvokeAgent(agentSpan, 0, 0, "succeeded", "")
	attrs := func(kvs []attribute.KeyValue) map[string]string {
		out := map[string]string{}
		for _, kv := range kvs {
			out[string(kv.Key)] = kv.Value.Emit()
		}
		return out
	}
	want := map[string]string{"gen_ai.transfer.target.name": "research", "gen_ai.caller.agent.name": "lead", "gen_ai.caller.agent.id": "t1"}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "execute_tool agent":
			got := attrs(s.Attributes())
			want["gen_ai.transfer.mode"] = "return_to_caller"
			for k, v := range want {
				if got[k] != v {
					t.Errorf("execute_tool agent: %s = %q, want %q", k, got[k], v)
				}
			}
		case "invoke_agent lead":
			if len(s.Events()) != 1 || s.Events()[0].Name != "gen_ai.handoff" {
				t.Fatalf("invoke_agent events %v; want one gen_ai.handoff", s.Events())
			}
			got := attrs(s.Events()[0].Attributes)
			if got["gen_ai.transfer.mode"] != "pass_control" || got["gen_ai.transfer.target.name"] != "writer" || got["gen_ai.caller.agent.name"] != "lead" {
				t.Errorf("handoff event %v", got)
			}
		}
	}
}
