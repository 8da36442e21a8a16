package durable_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/test/otlp"
	"github.com/formica-run/formica/test/proc"
)

// jsonLines decodes every line a process wrote to stderr: each must be a
// JSON object.
func jsonLines(t *testing.T, who string, p *proc.Proc) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(p.Stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("%s: a log line is not JSON (%v): %q", who, err, line)
			continue
		}
		out = append(out, m)
	}
	return out
}

// byRun is the lines about run, by message.
func byRun(lines []map[string]any, run string) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, l := range lines {
		if l["run_id"] == run {
			msg, _ := l["msg"].(string)
			out[msg] = append(out[msg], l)
		}
	}
	return out
}

// TestJSONLogs: a coordinator and a worker with --log-format json write
// only JSON lines; a run's lines are found by run_id: its start and end
// (status, duration, attempts, tokens) on the coordinator, each thread's
// end and a model retry (provider, status, attempt, wait) on the worker,
// those carrying the run's trace_id while tracing.
func TestJSONLogs(t *testing.T) {
	t.Parallel()
	rcv := otlp.Start(t)
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
	var mu sync.Mutex
	limited := false
	srv := openAIServer(t, func(r *chatRequest) chatAnswer {
		task, turn := r.task(), r.turn()
		switch {
		case task == "logs-root" && turn == 0:
			return chatAnswer{calls: []toolCall{{"agent", map[string]string{"name": "a", "task": "logs-a"}},
				{"agent", map[string]string{"name": "b", "task": "logs-b"}}}}
		case task == "logs-b":
			mu.Lock()
			defer mu.Unlock()
			if !limited {
				limited = true
				return chatAnswer{status: http.StatusTooManyRequests}
			}
		}
		return chatAnswer{text: task + " done"}
	})
	c := startCoord(t, coordOpts{env: otel, extra: []string{"--log-format", "json"}})
	w := c.startWorkerWith("w1", 4, append([]string{"OPENAI_BASE_URL=" + srv.URL + "/v1", "OPENAI_API_KEY=test-key"}, otel...),
		"--log-format", "json")

	// The request is traced by its caller: the run's trace goes on from it.
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	code, body, err := c.do(http.MethodPost, "/v1/runs", map[string]any{"task": "logs-root", "model": "openai:gpt-test"},
		"traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	var sub struct {
		RunID string `json:"run_id"`
	}
	if err != nil || code != http.StatusAccepted || json.Unmarshal(body, &sub) != nil {
		t.Fatalf("POST /v1/runs: %d %s %v", code, body, err)
	}
	run := sub.RunID
	rec := c.waitFinal(run)
	if rec.Status != event.Succeeded || rec.TraceID != callerTrace {
		t.Fatalf("run %s: %s (%s), trace %q, want the caller's %s", run, rec.Status, rec.Error, rec.TraceID, callerTrace)
	}
	// The worker logs a thread's end before it sends the result, the
	// coordinator the run's end once its record is written.
	proc.WaitUntil(t, runTimeout, "the coordinator logs the run's end", func() bool {
		return strings.Contains(c.p.Stderr.String(), `"msg":"run finished"`)
	})

	coord := byRun(jsonLines(t, "coordinator", c.p), run)
	if len(coord["run started"]) != 1 || len(coord["run finished"]) != 1 {
		t.Fatalf("coordinator lines of run %s: %v", run, coord)
	}
	fin := coord["run finished"][0]
	for k, want := range map[string]any{"status": "succeeded", "attempts": 1.0, "threads": 3.0, "trace_id": rec.TraceID,
		"input_tokens": float64(rec.Usage.InputTokens), "output_tokens": float64(rec.Usage.OutputTokens), "level": "INFO"} {
		if fin[k] != want {
			t.Errorf("run finished: %s = %v, want %v", k, fin[k], want)
		}
	}
	if d, _ := fin["duration"].(float64); d <= 0 {
		t.Errorf("run finished: duration %v", fin["duration"])
	}

	wl := byRun(jsonLines(t, "worker", w), run)
	if got := len(wl["thread finished"]); got != 3 {
		t.Errorf("worker: %d thread finished lines for run %s, want 3", got, run)
	}
	for _, l := range wl["thread finished"] {
		if l["trace_id"] != rec.TraceID || l["span_id"] == nil || l["thread_id"] == nil || l["status"] != "succeeded" {
			t.Errorf("worker: thread finished line %v", l)
		}
	}
	retries := wl["model call retried"]
	if len(retries) != 1 {
		t.Fatalf("worker: %d model call retried lines, want 1 (%v)", len(retries), wl)
	}
	for k, want := range map[string]any{"level": "WARN", "provider": "openai", "status": 429.0, "attempt": 2.0,
		"reason": "rate_limited", "trace_id": rec.TraceID} {
		if retries[0][k] != want {
			t.Errorf("model call retried: %s = %v, want %v", k, retries[0][k], want)
		}
	}
	if _, ok := retries[0]["wait"]; !ok {
		t.Error("model call retried: no wait")
	}
}
