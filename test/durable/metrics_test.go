package durable_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/test/proc"
)

// scrape is one parsed /metrics page.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, url, token string) scrape {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v", url, err)
	}
	return fams
}

// series finds the series of name with exactly labels (name=value pairs).
func (s scrape) series(name string, labels ...string) *dto.Metric {
	f := s[name]
	if f == nil {
		return nil
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		match := true
		for _, l := range m.Label {
			if want[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's count; 0 when absent.
func (s scrape) value(name string, labels ...string) float64 {
	m := s.series(name, labels...)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

type moved struct {
	name   string
	labels []string
	want   float64
}

// checkMoved checks each series moved by exactly want between two scrapes.
func checkMoved(t *testing.T, where string, before, after scrape, ms []moved) {
	t.Helper()
	for _, m := range ms {
		if after[m.name] == nil {
			t.Errorf("%s: no metric %s", where, m.name)
			continue
		}
		if got := after.value(m.name, m.labels...) - before.value(m.name, m.labels...); got != m.want {
			t.Errorf("%s: %s%v moved by %v, want %v", where, m.name, m.labels, got, m.want)
		}
	}
}

// TestMetrics scrapes /metrics on the coordinator (its HTTP API) and on a
// worker (worker --http) before and after a run on a Chat Completions
// server: root → helpers a and b; a's own spawn is refused (depth), then
// a's write_file waits for an approval a person allows; b's first model
// call is rate limited and retried. Every counter moves by what happened.
func TestMetrics(t *testing.T) {
	t.Parallel()
	rateLimited := false
	srv := openAIServer(t, func(r *chatRequest) chatAnswer {
		task, turn := r.task(), r.turn()
		switch {
		case task == "root" && turn == 0:
			return chatAnswer{calls: []toolCall{{"agent", map[string]string{"name": "a", "task": "task-a"}},
				{"agent", map[string]string{"name": "b", "task": "task-b"}}}}
		case task == "task-a" && turn == 0:
			return chatAnswer{calls: []toolCall{{"agent", map[string]string{"name": "deep", "task": "task-deep"}}}}
		case task == "task-a" && turn == 1:
			return chatAnswer{calls: []toolCall{{"write_file", map[string]string{"path": "metrics.txt", "content": "x"}}}}
		case task == "task-b" && !rateLimited:
			rateLimited = true
			return chatAnswer{status: http.StatusTooManyRequests}
		}
		return chatAnswer{text: task + " done"}
	})
	c := startCoord(t, coordOpts{approvalTimeout: "2m"})
	httpPort := proc.FreePorts(t, 1)[0]
	workerURL := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	c.startWorkerWith("w1", 4, []string{"OPENAI_BASE_URL=" + srv.URL + "/v1", "OPENAI_API_KEY=test-key"},
		"--http", fmt.Sprintf("127.0.0.1:%d", httpPort))
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(workerURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("worker GET %s: %d", path, resp.StatusCode)
		}
	}

	coordBefore := scrapeMetrics(t, c.api+"/metrics", c.token)
	workerBefore := scrapeMetrics(t, workerURL+"/metrics", "")

	run := c.submit(map[string]any{"task": "root", "model": "openai:gpt-test", "agent_max_depth": 1})
	a := c.waitApproval(run)
	c.call(http.StatusOK, http.MethodPost, "/v1/approvals/"+a.ID, map[string]string{"decision": "allow"}, nil)
	rec := c.waitFinal(run)
	if rec.Status != event.Succeeded || len(rec.Threads) != 3 || rec.Refusals.Depth != 1 {
		t.Fatalf("run %s: %s (%s), %d threads, refusals %+v, output %q", run, rec.Status, rec.Error, len(rec.Threads), rec.Refusals, rec.Output)
	}

	coordAfter := scrapeMetrics(t, c.api+"/metrics", c.token)
	workerAfter := scrapeMetrics(t, workerURL+"/metrics", "")

	checkMoved(t, "coordinator", coordBefore, coordAfter, []moved{
		{"formica_runs_submitted_total", nil, 1},
		{"formica_run_attempts_total", nil, 1},
		{"formica_runs_finished_total", []string{"status", "succeeded"}, 1},
		{"formica_runs_finished_total", []string{"status", "failed"}, 0},
		{"formica_runs_active", nil, 0},
		{"formica_run_duration_seconds", nil, 1},
		{"formica_run_queue_wait_seconds", nil, 1},
		{"formica_threads_spawned_total", nil, 2},
		{"formica_spawns_refused_total", []string{"reason", "depth"}, 1},
		{"formica_spawns_refused_total", []string{"reason", "threads"}, 0},
		{"formica_threads_finished_total", []string{"status", "succeeded"}, 3},
		{"formica_threads_live", nil, 0},
		{"formica_thread_duration_seconds", nil, 3},
		{"formica_spawn_latency_seconds", nil, 2},
		{"formica_placement_wait_seconds", nil, 3},
		{"formica_placements_total", []string{"outcome", "placed"}, 3},
		{"formica_approvals_total", []string{"decision", "allow"}, 1},
		{"formica_approvals_total", []string{"decision", "deny"}, 0},
		{"formica_approvals_pending", nil, 0},
		{"formica_approval_wait_seconds", nil, 1},
		{"formica_http_requests_total", []string{"route", "POST /v1/runs", "code", "202"}, 1},
		{"formica_http_requests_total", []string{"route", "POST /v1/approvals/{id}", "code", "200"}, 1},
	})
	checkMoved(t, "worker", workerBefore, workerAfter, []moved{
		{"formica_model_requests_total", []string{"provider", "openai", "model", "gpt-test", "outcome", "ok"}, 6},
		{"formica_model_requests_total", []string{"provider", "openai", "model", "gpt-test", "outcome", "error"}, 0},
		{"formica_model_request_duration_seconds", []string{"provider", "openai", "model", "gpt-test"}, 6},
		{"formica_model_tokens_total", []string{"provider", "openai", "model", "gpt-test", "direction", "input"}, 6 * promptTokens},
		{"formica_model_tokens_total", []string{"provider", "openai", "model", "gpt-test", "direction", "output"}, 6 * completionTokens},
		{"formica_model_retries_total", []string{"provider", "openai", "reason", "rate_limited"}, 1},
		{"formica_tool_calls_total", []string{"tool", "agent", "outcome", "ok"}, 3},
		{"formica_tool_calls_total", []string{"tool", "write_file", "outcome", "ok"}, 1},
		{"formica_tool_call_duration_seconds", []string{"tool", "agent"}, 3},
		{"formica_tool_call_duration_seconds", []string{"tool", "write_file"}, 1},
	})
	// The worker gauges come from the worker alone, so a sum over every
	// process scraped is the fleet.
	if workerAfter.value("formica_workers", "state", "live") != 1 || workerAfter.value("formica_worker_slots") != 4 {
		t.Errorf("worker: formica_workers{live} %v, formica_worker_slots %v; want 1 and 4",
			workerAfter.value("formica_workers", "state", "live"), workerAfter.value("formica_worker_slots"))
	}
	if coordAfter["formica_workers"] != nil || coordAfter["formica_worker_slots"] != nil {
		t.Errorf("coordinator without local workers exports the worker gauges: %v", coordAfter["formica_workers"])
	}
	for where, s := range map[string]scrape{"coordinator": coordAfter, "worker": workerAfter} {
		bi := s["formica_build_info"]
		if bi == nil || len(bi.Metric) != 1 || s.series("formica_build_info", "version", labelOf(bi.Metric[0], "version"),
			"go_version", labelOf(bi.Metric[0], "go_version")) == nil || !strings.HasPrefix(labelOf(bi.Metric[0], "go_version"), "go") {
			t.Errorf("%s: formica_build_info %v", where, bi)
		}
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
			if s[name] == nil {
				t.Errorf("%s: no %s (Go and process collectors)", where, name)
			}
		}
		// No run or thread id is ever a label.
		for name, f := range s {
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if l.GetValue() == run || strings.Contains(l.GetName(), "run") || strings.Contains(l.GetName(), "thread") {
						t.Errorf("%s: %s has label %s=%q", where, name, l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
