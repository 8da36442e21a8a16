package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model/quotaserver"
)

// TestQuotaSharedAcrossWorkerProcesses fans 120 helpers out over two worker
// processes against one provider quota (600 requests a minute, burst 10, 16
// in flight, 300ms an answer) that answers refusals with Retry-After alone
// (no rate-limit headers): the workers share what they learn through the
// coordinator, so every helper succeeds and few requests are refused.
func TestQuotaSharedAcrossWorkerProcesses(t *testing.T) {
	quota := quotaserver.Config{Format: quotaserver.OpenAI, RequestsPerMinute: 600, Burst: 10,
		MaxInFlight: 16, Latency: latencyQuota, Signals: quotaserver.SignalRetryAfter}
	srv, err := quotaserver.Start(quota)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	providersFile := filepath.Join(t.TempDir(), "providers.yaml")
	file := fmt.Sprintf("endpoints:\n  q:\n    format: openai\n    base_url: %s\n", srv.BaseURL())
	if err := os.WriteFile(providersFile, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "c1")
	s.startWorker("w1", 128, "--providers", providersFile)
	s.startWorker("w2", 128, "--providers", providersFile)
	const n = 120
	rec := succeeded(t, s.run("--model", "q/model", "--agent-max-threads", "200", fmt.Sprintf("fanout %d", n)))
	failed := 0
	for _, th := range rec.Threads {
		if th.Depth == 1 && th.Status != event.Succeeded {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d helpers failed", failed, n)
	}
	if want := fmt.Sprintf("collected %d results, %d done", n, n); !strings.Contains(rec.Output, want) {
		t.Errorf("output %q, want it to say %q", rec.Output, want)
	}
	st := srv.Stats()
	ideal := quota.FanoutIdeal(n)
	took := st.Last.Sub(st.First) + latencyQuota
	t.Logf("%d requests, %d refused (%.1f%%); %v against the quota's ideal %v (%.2f×)", st.Requests, st.Refused,
		100*float64(st.Refused)/float64(st.Requests), took.Round(time.Millisecond), ideal, float64(took)/float64(ideal))
	if st.Refused*5 > st.Requests {
		t.Errorf("%d of %d requests refused, want at most 20%%", st.Refused, st.Requests)
	}
}

// latencyQuota is the quota server's time per answer in these tests.
const latencyQuota = 300 * time.Millisecond

// TestQuotaOfKilledWorkerComesBack: a worker killed while its call holds the
// endpoint's only place in flight gives the place back once it is found
// lost, so the thread placed again on another worker gets it.
func TestQuotaOfKilledWorkerComesBack(t *testing.T) {
	called := make(chan struct{}, 8) // each accepted call, as it starts its answer
	srv, err := quotaserver.Start(quotaserver.Config{Format: quotaserver.OpenAI, Latency: 4 * time.Second,
		Respond: func(r quotaserver.Request) quotaserver.Reply {
			called <- struct{}{}
			return quotaserver.DefaultReply(r)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	providersFile := filepath.Join(t.TempDir(), "providers.yaml")
	file := fmt.Sprintf("endpoints:\n  q:\n    format: openai\n    base_url: %s\n    in_flight: 1\n", srv.BaseURL())
	if err := os.WriteFile(providersFile, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "c1")
	w1 := s.startWorker("w1", 4, "--providers", providersFile)
	run := s.run("--model", "q/model", "hello")
	select {
	case <-called:
	case <-time.After(runTimeout):
		t.Fatal("the run's call never reached the provider")
	}
	w1.kill(t)
	s.startWorker("w2", 4, "--providers", providersFile)
	rec := succeeded(t, run)
	if rec.Output != "done: hello" {
		t.Errorf("output %q", rec.Output)
	}
	if st := srv.Stats(); st.Accepted != 2 {
		t.Errorf("the provider accepted %d calls, want 2 (the killed one and the one placed again)", st.Accepted)
	}
}
