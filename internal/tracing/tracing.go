// Package tracing names Formica's OpenTelemetry spans and attributes, after
// the OpenTelemetry GenAI semantic conventions (invoke_agent, chat,
// execute_tool). The conventions are still marked development, so every name
// they give lives here, in one place, to follow the spec as it moves.
//
// Spans go to the global tracer provider: a no-op until package export
// installs one from the standard OTEL_* environment. Code that starts spans
// adds attributes only when the span records. With no provider installed and
// no trace to carry on (no valid span context in ctx), a span start returns
// ctx as it is and the shared no-op span: tracing off costs a context lookup
// per span and allocates nothing (the global no-op tracer would allocate a
// span, a context and the span's name at every start).
//
// A trace crosses processes in NATS headers: traceparent and tracestate
// (W3C Trace Context), written lower-case and read case-insensitively.
package tracing

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span.
const ScopeName = "github.com/formica-run/formica"

// Operation names (gen_ai.operation.name) and span name prefixes.
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
	// SpanSubmit is the root of a run's trace where it is submitted.
	SpanSubmit = "submit_run"
)

// Attribute keys.
const (
	AttrOperation     = attribute.Key("gen_ai.operation.name")
	AttrAgentName     = attribute.Key("gen_ai.agent.name")
	AttrAgentID       = attribute.Key("gen_ai.agent.id")
	AttrConversation  = attribute.Key("gen_ai.conversation.id")
	AttrRequestModel  = attribute.Key("gen_ai.request.model")
	AttrResponseModel = attribute.Key("gen_ai.response.model")
	AttrResponseID    = attribute.Key("gen_ai.response.id")
	AttrServerAddress = attribute.Key("server.address")
	AttrServerPort    = attribute.Key("server.port")
	AttrProvider      = attribute.Key("gen_ai.provider.name")
	AttrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	AttrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	AttrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	// AttrCacheReadTokens and AttrCacheWriteTokens are the parts of
	// gen_ai.usage.input_tokens read from and written to the provider's
	// prompt cache.
	AttrCacheReadTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	AttrCacheWriteTokens = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	AttrToolName         = attribute.Key("gen_ai.tool.name")
	AttrToolCallID       = attribute.Key("gen_ai.tool.call.id")
	AttrToolArguments    = attribute.Key("gen_ai.tool.call.arguments")
	AttrToolResult       = attribute.Key("gen_ai.tool.call.result")
	AttrErrorType        = attribute.Key("error.type")

	AttrRunID       = attribute.Key("formica.run.id")
	AttrThreadDepth = attribute.Key("formica.thread.depth")
	AttrThreadPath  = attribute.Key("formica.thread.path")
	AttrWorkerID    = attribute.Key("formica.worker.id")
	AttrAttempt     = attribute.Key("formica.attempt")
	AttrToolOutcome = attribute.Key("formica.tool.outcome")
	// AttrCostUSD is a model call's cost in US dollars, when its model has a price.
	AttrCostUSD = attribute.Key("formica.cost_usd")
)

// Span event names.
const (
	EventApprovalRequested = "formica.approval.requested"
	EventApprovalResolved  = "formica.approval.resolved"
	EventSpawnRefused      = "formica.spawn.refused"
)

// Trace context headers, lower-case as sent.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// CaptureContentEnv, set to true, puts message content and tool arguments
// and results on spans; off by default, since they may hold secrets.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

var captureContent = strings.EqualFold(os.Getenv(CaptureContentEnv), "true")

// Tracer is Formica's tracer on the global provider.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// defaultProvider is the global provider as it is before anything installs
// one: otel.SetTracerProvider replaces it.
var defaultProvider = otel.GetTracerProvider()

// noSpan is the shared span of an untraced context.
var noSpan = trace.SpanFromContext(context.Background())

// start starts span "op name" (or "op" without a name), or returns ctx and
// the no-op span when nothing would record or carry it.
func start(ctx context.Context, op, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if otel.GetTracerProvider() == defaultProvider && !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, noSpan
	}
	if name != "" {
		op += " " + name
	}
	return Tracer().Start(ctx, op, trace.WithSpanKind(kind))
}

// StartSubmit starts a run's root span where it is submitted (PRODUCER:
// the run goes on elsewhere, after the span may have ended).
func StartSubmit(ctx context.Context, runID string) (context.Context, trace.Span) {
	ctx, span := start(ctx, SpanSubmit, "", trace.SpanKindProducer)
	if span.IsRecording() {
		span.SetAttributes(AttrRunID.String(runID), AttrConversation.String(runID))
	}
	return ctx, span
}

// Agent is what an invoke_agent span says of a thread.
type Agent struct {
	Name, ThreadID, RunID, Path, Worker string
	Provider, Model                     string
	Depth, Attempt                      int
}

// StartInvokeAgent starts a thread's span, a child of whatever ctx carries
// (its parent's execute_tool agent span, or the run's submission).
func StartInvokeAgent(ctx context.Context, a Agent) (context.Context, trace.Span) {
	ctx, span := start(ctx, OpInvokeAgent, a.Name, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(AttrOperation.String(OpInvokeAgent), AttrAgentName.String(a.Name), AttrAgentID.String(a.ThreadID),
			AttrConversation.String(a.RunID), AttrRunID.String(a.RunID), AttrThreadDepth.Int(a.Depth),
			AttrThreadPath.String(a.Path), AttrWorkerID.String(a.Worker), AttrAttempt.Int(a.Attempt))
		if a.Model != "" {
			span.SetAttributes(AttrRequestModel.String(a.Model), AttrProvider.String(a.Provider))
		}
	}
	return ctx, span
}

// EndInvokeAgent ends a thread's span with its own token usage and status.
func EndInvokeAgent(span trace.Span, input, output int64, status, reason string) {
	if span.IsRecording() {
		span.SetAttributes(AttrInputTokens.Int64(input), AttrOutputTokens.Int64(output))
		if status != "succeeded" {
			span.SetAttributes(AttrErrorType.String(status))
			span.SetStatus(codes.Error, reason)
		}
	}
	span.End()
}

// StartChat starts a model call's span (CLIENT). A provider with no model
// names of its own (sim) is its model.
func StartChat(ctx context.Context, provider, model string) (context.Context, trace.Span) {
	model = cmp.Or(model, provider)
	ctx, span := start(ctx, OpChat, model, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(AttrOperation.String(OpChat), AttrProvider.String(provider), AttrRequestModel.String(model))
	}
	return ctx, span
}

// EndChat ends a model call's span: the response's id (if any), the
// model that answered, why it stopped, its tokens, its error.
func EndChat(span trace.Span, id, model string, finish string, input, output int64, err error) {
	if span.IsRecording() {
		span.SetAttributes(AttrInputTokens.Int64(input), AttrOutputTokens.Int64(output))
		if id != "" {
			span.SetAttributes(AttrResponseID.String(id))
		}
		if model != "" {
			span.SetAttributes(AttrResponseModel.String(model))
		}
		if finish != "" {
			span.SetAttributes(AttrFinishReasons.StringSlice([]string{finish}))
		}
		if err != nil {
			span.SetAttributes(AttrErrorType.String(errorType(err)))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// ChatUsage puts a model call's cached tokens and cost (nil: no price) on
// the chat span in ctx, before EndChat ends it.
func ChatUsage(ctx context.Context, cacheRead, cacheWrite int64, costUSD *float64) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if cacheRead > 0 {
		span.SetAttributes(AttrCacheReadTokens.Int64(cacheRead))
	}
	if cacheWrite > 0 {
		span.SetAttributes(AttrCacheWriteTokens.Int64(cacheWrite))
	}
	if costUSD != nil {
		span.SetAttributes(AttrCostUSD.Float64(*costUSD))
	}
}

// StartTool starts a tool call's span.
func StartTool(ctx context.Context, tool, callID, args string) (context.Context, trace.Span) {
	ctx, span := start(ctx, OpExecuteTool, tool, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(AttrOperation.String(OpExecuteTool), AttrToolName.String(tool), AttrToolCallID.String(callID))
		if captureContent {
			span.SetAttributes(AttrToolArguments.String(args))
		}
	}
	return ctx, span
}

// The GenAI conventions' transfer modes between agents.
const (
	// TransferReturnToCaller: a helper runs and its answer returns to the
	// calling agent (an agent call).
	TransferReturnToCaller = "return_to_caller"
	// TransferPassControl: control passes to another agent (a handoff).
	TransferPassControl = "pass_control"
)

// Attributes of a transfer between agents.
const (
	AttrTransferMode       = attribute.Key("gen_ai.transfer.mode")
	AttrTransferTargetName = attribute.Key("gen_ai.transfer.target.name")
	AttrCallerAgentName    = attribute.Key("gen_ai.caller.agent.name")
	AttrCallerAgentID      = attribute.Key("gen_ai.caller.agent.id")
)

// Transfer marks the span in ctx (an agent call's execute_tool span, or a
// thread's invoke_agent span at a handoff) as a transfer from the agent
// callerName (thread callerID) to target, in mode.
func Transfer(ctx context.Context, mode, target, callerName, callerID string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrTransferMode.String(mode), AttrTransferTargetName.String(target),
		AttrCallerAgentName.String(callerName), AttrCallerAgentID.String(callerID))
}

// Handoff records on the thread's span in ctx (invoke_agent) that control
// passed from agent callerName to target: an event, since a thread may hand
// off more than once.
func Handoff(ctx context.Context, target, callerName, callerID string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("gen_ai.handoff", trace.WithAttributes(AttrTransferMode.String(TransferPassControl),
		AttrTransferTargetName.String(target), AttrCallerAgentName.String(callerName), AttrCallerAgentID.String(callerID)))
}

// EndTool ends a tool call's span with its outcome (ok, error, denied).
func EndTool(span trace.Span, outcome, result string) {
	if span.IsRecording() {
		span.SetAttributes(AttrToolOutcome.String(outcome))
		if captureContent {
			span.SetAttributes(AttrToolResult.String(result))
		}
		if outcome == "error" {
			span.SetAttributes(AttrErrorType.String("tool_error"))
			span.SetStatus(codes.Error, "tool call failed")
		}
	}
	span.End()
}

// AddEvent records a span event (an approval, a refusal) on ctx's span.
func AddEvent(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

func errorType(err error) string {
	if t, ok := err.(interface{ Code() string }); ok {
		return t.Code()
	}
	return "model_error"
}

var propagator = propagation.TraceContext{}

// Inject adds ctx's trace context to h (traceparent, tracestate) and returns
// h, allocated if nil and needed. Nothing is added without a valid span.
func Inject(ctx context.Context, h map[string]string) map[string]string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h
	}
	if h == nil {
		h = make(map[string]string, 2)
	}
	propagator.Inject(ctx, mapCarrier(h))
	return h
}

// InjectHTTP adds ctx's trace context to an HTTP request's header (a model
// provider's request), so a server that traces joins the run's trace.
func InjectHTTP(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// ChatServer puts the provider's address (server.address, server.port) on
// the chat span in ctx: the request's URL, known once the SDK builds it.
func ChatServer(ctx context.Context, u *url.URL) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || u == nil {
		return
	}
	span.SetAttributes(AttrServerAddress.String(u.Hostname()))
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p, err := strconv.Atoi(port); err == nil {
		span.SetAttributes(AttrServerPort.Int(p))
	}
}

// Extract returns ctx with the remote span context h carries, keys read
// case-insensitively.
func Extract(ctx context.Context, h map[string]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, mapCarrier(h))
}

// Carry copies the trace headers of h (any case) into a fresh lower-case map,
// for a message sent later on the same trace; nil when h has none.
func Carry(h map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{HeaderTraceparent, HeaderTracestate} {
		if v := get(h, k); v != "" {
			if out == nil {
				out = make(map[string]string, 2)
			}
			out[k] = v
		}
	}
	return out
}

// TraceID is the id of ctx's trace, or "".
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// TraceIDOf is the trace id a traceparent header names, or "".
func TraceIDOf(h map[string]string) string {
	return TraceID(Extract(context.Background(), h))
}

// mapCarrier reads keys case-insensitively and writes them lower-case.
type mapCarrier map[string]string

func (c mapCarrier) Get(key string) string { return get(c, key) }

func (c mapCarrier) Set(key, value string) { c[strings.ToLower(key)] = value }

func (c mapCarrier) Keys() []string { return slices.Collect(maps.Keys(c)) }

func get(h map[string]string, key string) string {
	if v, ok := h[key]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

// URL fills a --trace-url template: {trace_id} becomes id. Empty without a
// template or an id.
func URL(template, id string) string {
	if template == "" || id == "" {
		return ""
	}
	return strings.ReplaceAll(template, "{trace_id}", id)
}
