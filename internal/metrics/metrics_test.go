package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.RunSubmitted()
	m.RunStarted()
	m.RunEnded("succeeded", time.Second, true)
	m.SpawnAdmitted()
	m.SpawnRefused("depth")
	m.ThreadEnded("failed", time.Second, true)
	m.ModelCall("openai", "x", time.Second, 1, 1, nil)
	m.ModelUsage("openai", "x", 1, 1, nil)
	m.ToolCall("bash", ToolOK, time.Second)
	m.ApprovalAnswered(DecisionAllow, time.Second)
	m.WorkerLoad(nil)
	m.JetStreamAssets(nil)
	if rec := httptest.NewRecorder(); true {
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 404 {
			t.Errorf("nil metrics served %d", rec.Code)
		}
	}
}

// TestSpawnPathAllocatesNothing: what the coordinator records per helper,
// and a model or tool call once its series exist, are atomic adds.
func TestSpawnPathAllocatesNothing(t *testing.T) {
	m := New(All)
	m.ModelCall("openai", "gpt", time.Millisecond, 1, 1, nil)
	m.ToolCall("agent", ToolOK, time.Millisecond)
	allocs := testing.AllocsPerRun(200, func() {
		m.SpawnAdmitted()
		m.PlacementWaited(time.Microsecond)
		m.Placement(OutcomePlaced)
		m.SpawnStarted(time.Millisecond)
		m.ThreadEnded("succeeded", time.Second, true)
		m.SpawnRefused("threads")
		m.ModelCall("openai", "gpt", time.Millisecond, 10, 2, nil)
		m.ModelUsage("openai", "gpt", 8, 1, nil)
		m.ToolCall("agent", ToolOK, time.Millisecond)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per helper, want 0", allocs)
	}
}

func TestExposition(t *testing.T) {
	m := New(All)
	// Two workers in one process report their sum.
	m.WorkerLoad(func() Load { return Load{Live: 1, Slots: 4, Used: 2, Parked: 1} })
	m.WorkerLoad(func() Load { return Load{Live: 1, Slots: 4, Used: 1} })
	m.ModelCall("anthropic", "claude", time.Second, 5, 7, errors.New("x"))
	cost := 0.25
	m.ModelUsage("anthropic", "claude", 4000, 300, &cost)
	m.ModelUsage("anthropic", "claude", 1000, 0, &cost)
	m.ModelUsage("sim", "", 0, 0, nil)
	m.ThreadReused()
	m.JournalWriteFailed()
	m.JetStreamAssets([]AssetCount{{Kind: "queue", Streams: 1, Consumers: 1}, {Kind: "other"}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`formica_workers{state="live"} 2`, `formica_worker_slots 8`, `formica_worker_slots_used 3`, `formica_worker_threads_parked 1`,
		`formica_model_requests_total{model="claude",outcome="error",provider="anthropic"} 1`,
		`formica_model_tokens_total{direction="output",model="claude",provider="anthropic"} 7`,
		`formica_model_cache_tokens_total{kind="read",model="claude",provider="anthropic"} 5000`,
		`formica_model_cache_tokens_total{kind="write",model="claude",provider="anthropic"} 300`,
		`formica_model_cost_usd_total{model="claude",provider="anthropic"} 0.5`,
		`formica_spawns_refused_total{reason="depth"} 0`, `formica_build_info{`, `go_goroutines`,
		`formica_journal_replays_total 0`, `formica_journal_threads_reused_total 1`, `formica_journal_write_errors_total 1`,
		`formica_jetstream_streams{kind="queue"} 1`, `formica_jetstream_consumers{kind="queue"} 1`,
		`formica_jetstream_streams{kind="other"} 0`, `formica_jetstream_consumers{kind="other"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			name := strings.Fields(line)[2]
			if !strings.HasPrefix(name, "formica_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
				t.Errorf("metric %s outside the formica_ namespace", name)
			}
		}
	}
}

// TestNoAssetsBeforeACount: a process that never counted the JetStream
// assets (a worker) exports no such gauge.
func TestNoAssetsBeforeACount(t *testing.T) {
	rec := httptest.NewRecorder()
	New(All).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if body := rec.Body.String(); strings.Contains(body, "formica_jetstream_") {
		t.Errorf("assets exported before a count:\n%s", body)
	}
}

// TestScrapeWithoutTheQueue: a queue that does not answer leaves its gauges
// out, and the scrape still serves every other metric with 200.
func TestScrapeWithoutTheQueue(t *testing.T) {
	m := New(All)
	m.QueueDepth(func(context.Context) (Queue, error) { return Queue{}, context.DeadlineExceeded })
	m.RunSubmitted()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "formica_runs_submitted_total 1") || strings.Contains(body, "formica_queue_pending_messages") {
		t.Fatalf("scrape with the queue not answering: %d\n%s", rec.Code, body)
	}
}

// TestModelLabelBounded: a provider's first MaxModelSeries model names get
// series of their own; calls of any later name count under "other", so a
// submitter typing new names adds no series.
func TestModelLabelBounded(t *testing.T) {
	m := New(All)
	for i := range MaxModelSeries + 8 {
		m.ModelCall("openai", fmt.Sprintf("m%d", i), time.Millisecond, 1, 1, nil)
	}
	m.ModelCall("openai", "m0", time.Millisecond, 1, 1, nil)     // an early name keeps its own
	m.ModelCall("anthropic", "m40", time.Millisecond, 1, 1, nil) // another provider's count is its own
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`formica_model_requests_total{model="m0",outcome="ok",provider="openai"} 2`,
		fmt.Sprintf(`formica_model_requests_total{model="m%d",outcome="ok",provider="openai"} 1`, MaxModelSeries-1),
		`formica_model_requests_total{model="other",outcome="ok",provider="openai"} 8`,
		`formica_model_requests_total{model="m40",outcome="ok",provider="anthropic"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q", want)
		}
	}
	if strings.Contains(text, fmt.Sprintf(`model="m%d",outcome="ok",provider="openai"`, MaxModelSeries)) {
		t.Errorf("a series for the %d-th name of a provider", MaxModelSeries+1)
	}
}

// TestMetricsByRole: a worker exports its model and tool metrics and no
// coordinator metric (which would read 0 on every worker and mislead
// sums); a coordinator exports no model or tool metric; both export the
// build info and the journal's write errors. Recording another role's
// metric is harmless.
func TestMetricsByRole(t *testing.T) {
	names := func(m *Metrics) map[string]bool {
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, mf := range mfs {
			out[mf.GetName()] = true
		}
		return out
	}
	w := New(Worker)
	w.RunSubmitted()
	w.ModelCall("openai", "gpt", time.Millisecond, 1, 1, nil)
	c := New(Coordinator)
	c.ModelCall("openai", "gpt", time.Millisecond, 1, 1, nil)
	c.RunSubmitted()
	// The worker gauges come from the workers alone: a coordinator's view
	// of the fleet, held by every coordinator, would count it once each.
	one := func() Load { return Load{Live: 1, Slots: 4} }
	w.WorkerLoad(one)
	c.WorkerLoad(one)
	for _, tc := range []struct {
		m        *Metrics
		has, not []string
	}{
		{w, []string{"formica_model_requests_total", "formica_build_info", "formica_journal_write_errors_total", "formica_workers"},
			[]string{"formica_runs_submitted_total", "formica_threads_live", "formica_queue_pending_messages", "formica_workers_lost_total"}},
		{c, []string{"formica_runs_submitted_total", "formica_threads_live", "formica_build_info", "formica_journal_write_errors_total", "formica_workers_lost_total"},
			[]string{"formica_model_requests_total", "formica_tool_calls_total", "formica_workers", "formica_worker_slots"}},
	} {
		got := names(tc.m)
		for _, n := range tc.has {
			if !got[n] {
				t.Errorf("%s missing", n)
			}
		}
		for _, n := range tc.not {
			if got[n] {
				t.Errorf("%s exported by the wrong role", n)
			}
		}
	}
}
