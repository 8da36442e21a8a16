package durable_test

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/test/otlp"
)

// TestTraceAcrossProcesses runs a depth-3 tree with parallel fan-out on a
// coordinator, two one-slot workers and the CLI, each exporting to the
// test's OTLP/HTTP receiver, and checks the one trace they make: the
// submission is its root, every helper's invoke_agent span is the child of
// its parent's execute_tool agent span whichever worker each ran on, and
// the GenAI attributes are there.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	rcv := otlp.Start(t)
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}

	// b and trace-a1x each answer only once the other has asked: both
	// are running at once, so on different workers (one slot each), and
	// some parent and helper ran on different workers.
	bAsked, deepAsked := make(chan struct{}), make(chan struct{})
	var bOnce, deepOnce sync.Once
	s := newChatServer(t, func(task string, req jRequest) jAnswer {
		turn := req.turn()
		switch {
		case task == "trace-root" && turn == 0:
			return jAnswer{calls: []call{agentCall("a", "trace-a"), agentCall("b", "trace-b")}}
		case task == "trace-a" && turn == 0:
			return jAnswer{calls: []call{agentCall("a1", "trace-a1"), agentCall("a2", "trace-a2")}}
		case task == "trace-a1" && turn == 0:
			return jAnswer{calls: []call{agentCall("a1x", "trace-a1x")}}
		case task == "trace-b":
			bOnce.Do(func() { close(bAsked) })
			return jAnswer{text: "b done", wait: deepAsked}
		case task == "trace-a1x":
			deepOnce.Do(func() { close(deepAsked) })
			return jAnswer{text: "a1x done", wait: bAsked}
		}
		return jAnswer{text: task + " done"}
	})
	c := startCoord(t, coordOpts{env: otel, extra: []string{"--trace-url", "http://traces.example/trace/{trace_id}"}})
	c.startChatWorkerEnv("w1", 1, s, otel, "--nats-creds", c.creds("worker", "w1"))
	c.startChatWorkerEnv("w2", 1, s, otel, "--nats-creds", c.creds("worker", "w2"))

	agent := writeFile(t, "agent.yaml", "name: formica\nmodel: openai:test-model\ntools: [agent]\n")
	p := c.startCLIEnv(otel, "submit", "--wait", "--id", "traced", "--agent", agent, "--agent-max-depth", "3",
		"--trace-url", "http://cli.example/{trace_id}", "trace-root")
	if code := p.Wait(t, cliTimeout); code != 0 {
		t.Fatalf("formica submit --wait: exit %d\n%s", code, p.Stderr.String())
	}
	run := c.record("traced")
	if run.Status != event.Succeeded || len(run.Threads) != 6 {
		t.Fatalf("run %s: %s (%s), %d threads", run.RunID, run.Status, run.Error, len(run.Threads))
	}
	if len(run.TraceID) != 32 || run.TraceURL != "http://traces.example/trace/"+run.TraceID {
		t.Fatalf("record trace_id %q, trace_url %q", run.TraceID, run.TraceURL)
	}
	if want := "formica: trace http://cli.example/" + run.TraceID; !strings.Contains(p.Stderr.String(), want) {
		t.Errorf("the CLI did not print %q:\n%s", want, p.Stderr.String())
	}

	// Spans of the six threads' last model calls end just before the
	// run does; the batches come within a few schedule delays.
	spans, ok := rcv.Wait(runTimeout, func(spans []otlp.Span) bool {
		n := 0
		for _, sp := range spans {
			if strings.HasPrefix(sp.Name, "invoke_agent ") {
				n++
			}
		}
		return n >= 6
	})
	if !ok {
		t.Fatalf("the receiver has %d spans, not all six threads' invoke_agent", len(spans))
	}
	byID := map[string]otlp.Span{}
	agents := map[string]otlp.Span{} // by thread id
	for _, sp := range spans {
		if got := hex.EncodeToString(sp.TraceId); got != run.TraceID {
			t.Errorf("span %q (%s) is in trace %s, not the run's %s", sp.Name, sp.Service, got, run.TraceID)
		}
		byID[hex.EncodeToString(sp.SpanId)] = sp
		if id, _ := sp.Attr("gen_ai.agent.id"); strings.HasPrefix(sp.Name, "invoke_agent ") {
			agents[id] = sp
		}
		if _, ok := sp.Attr("gen_ai.tool.call.arguments"); ok {
			t.Errorf("span %q carries tool arguments without the capture setting", sp.Name)
		}
	}
	parentOf := func(sp otlp.Span) (otlp.Span, bool) {
		p, ok := byID[hex.EncodeToString(sp.ParentSpanId)]
		return p, ok
	}

	crossed := 0
	workers := map[string]bool{}
	for _, th := range run.Threads {
		sp, ok := agents[th.ID]
		if !ok {
			t.Errorf("no invoke_agent span for thread %s (%s)", th.Name, th.ID)
			continue
		}
		wantAttrs := map[string]string{
			"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": th.Name, "gen_ai.conversation.id": run.RunID,
			"gen_ai.request.model": "test-model", "gen_ai.provider.name": "openai", "formica.run.id": run.RunID,
			"formica.thread.depth": fmt.Sprint(th.Depth), "formica.worker.id": th.Worker, "formica.attempt": "1",
			"gen_ai.usage.input_tokens":  fmt.Sprint(th.Usage.InputTokens),
			"gen_ai.usage.output_tokens": fmt.Sprint(th.Usage.OutputTokens),
		}
		for k, want := range wantAttrs {
			if got, _ := sp.Attr(k); got != want {
				t.Errorf("%s: %s = %q, want %q", sp.Name, k, got, want)
			}
		}
		if path, _ := sp.Attr("formica.thread.path"); path == "" || sp.Name != "invoke_agent "+th.Name ||
			sp.Kind != tracepb.Span_SPAN_KIND_INTERNAL || sp.Service != "formica-worker" {
			t.Errorf("thread %s: span %q kind %v service %q path %q", th.Name, sp.Name, sp.Kind, sp.Service, path)
		}
		workers[th.Worker] = true
		parent, ok := parentOf(sp)
		if !ok {
			t.Errorf("%s: its parent span %x was not received", sp.Name, sp.ParentSpanId)
			continue
		}
		if th.ParentID == "" {
			// The root nests under the CLI's submission.
			if parent.Name != "submit_run" || parent.Service != "formica" || parent.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
				t.Errorf("root's parent is %q (%s, %v), want the CLI's submit_run", parent.Name, parent.Service, parent.Kind)
			}
			if len(sp.ParentSpanId) == 0 {
				t.Error("root invoke_agent has no parent")
			}
			continue
		}
		// A helper nests under its parent's execute_tool agent span,
		// itself under the parent thread's invoke_agent.
		if tool, _ := parent.Attr("gen_ai.tool.name"); parent.Name != "execute_tool agent" || tool != "agent" {
			t.Errorf("%s: parent span is %q, want execute_tool agent", sp.Name, parent.Name)
			continue
		}
		if id, _ := parent.Attr("gen_ai.tool.call.id"); id == "" {
			t.Errorf("%s: its execute_tool span has no gen_ai.tool.call.id", sp.Name)
		}
		grand, ok := parentOf(parent)
		if pid, _ := grand.Attr("gen_ai.agent.id"); !ok || pid != th.ParentID {
			t.Errorf("%s: its execute_tool agent span is under %q (agent %q), want thread %s's invoke_agent", sp.Name, grand.Name, pid, th.ParentID)
		}
		// The agent call is a transfer that returns to its caller.
		callerName, _ := grand.Attr("gen_ai.agent.name")
		for k, want := range map[string]string{"gen_ai.transfer.mode": "return_to_caller", "gen_ai.transfer.target.name": th.Name,
			"gen_ai.caller.agent.name": callerName, "gen_ai.caller.agent.id": th.ParentID} {
			if got, _ := parent.Attr(k); got != want {
				t.Errorf("%s: its execute_tool agent span has %s = %q, want %q", sp.Name, k, got, want)
			}
		}
		if pw, _ := grand.Attr("formica.worker.id"); pw != th.Worker {
			crossed++
		}
	}
	if crossed == 0 || len(workers) != 2 {
		t.Errorf("%d parent/helper pairs crossed workers, threads ran on %v; want some, on two", crossed, workers)
	}

	// Each process has a resource of its own: the coordinator, the two
	// workers and the CLI, each naming its version.
	instances := map[string]string{}
	for _, sp := range spans {
		id := sp.Resource["service.instance.id"]
		if id == "" || sp.Resource["service.version"] == "" {
			t.Errorf("span %q (%s): resource %v lacks service.instance.id or service.version", sp.Name, sp.Service, sp.Resource)
			continue
		}
		if w, _ := sp.Attr("formica.worker.id"); strings.HasPrefix(sp.Name, "invoke_agent ") {
			if prev, seen := instances[w]; seen && prev != id {
				t.Errorf("worker %s's spans carry two instance ids, %s and %s", w, prev, id)
			}
			instances[w] = id
		}
	}
	if len(instances) != 2 || instances["w1"] == instances["w2"] {
		t.Errorf("workers' instance ids %v, want two distinct", instances)
	}

	// Tokens are counted once: the chat spans' tokens add up to the run's.
	var chatIn, chatOut int64
	chats := 0
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, "anthropic.") || strings.HasPrefix(sp.Name, "openai.") {
			t.Errorf("a provider SDK's own span %q repeats a chat span", sp.Name)
		}
		if !strings.HasPrefix(sp.Name, "chat ") {
			continue
		}
		chats++
		in, _ := sp.Attr("gen_ai.usage.input_tokens")
		out, _ := sp.Attr("gen_ai.usage.output_tokens")
		n, _ := strconv.ParseInt(in, 10, 64)
		m, _ := strconv.ParseInt(out, 10, 64)
		chatIn, chatOut = chatIn+n, chatOut+m
		if addr, _ := sp.Attr("server.address"); addr != "127.0.0.1" {
			t.Errorf("chat span server.address %q, want the provider's 127.0.0.1", addr)
		}
		if id, _ := sp.Attr("gen_ai.response.id"); id == "" {
			t.Errorf("chat span has no gen_ai.response.id")
		}
		parent, ok := parentOf(sp)
		if !ok || !strings.HasPrefix(parent.Name, "invoke_agent ") || sp.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat span (kind %v) under %q, want a CLIENT span under invoke_agent", sp.Kind, parent.Name)
		}
		for _, k := range []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model",
			"gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
			if _, ok := sp.Attr(k); !ok {
				t.Errorf("chat span has no %s", k)
			}
		}
	}
	// Three parents call the model twice (agents, then text), three
	// helpers once.
	if chats != 9 {
		t.Errorf("%d chat spans, want 9", chats)
	}
	if chatIn != run.Usage.InputTokens || chatOut != run.Usage.OutputTokens {
		t.Errorf("chat spans sum to %d input and %d output tokens, the run used %d and %d", chatIn, chatOut, run.Usage.InputTokens, run.Usage.OutputTokens)
	}
}
