package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model/quotaserver"
)

// TestQuotaSharedAcrossWorkerProcesses fans 120 helpers out over two worker
// processes against one provider quota that answers refusals with
// Retry-After alone (no rate-limit headers): the workers share what they
// learn through the coordinator, so every helper succeeds and few requests
// are refused.
func TestQuotaSharedAcrossWorkerProcesses(t *testing.T) {
	srv, err := quotaserver.Start(quotaserver.Config{Format: quotaserver.OpenAI, RequestsPerMinute: 1200, Burst: 10,
		MaxInFlight: 16, Latency: latencyQuota, Signals: quotaserver.SignalRetryAfter})
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
	t.Logf("%d requests, %d refused (%.1f%%), from %v to %v", st.Requests, st.Refused,
		100*float64(st.Refused)/float64(st.Requests), st.First.Format("15:04:05.000"), st.Last.Format("15:04:05.000"))
	if st.Refused*5 > st.Requests {
		t.Errorf("%d of %d requests refused, want at most 20%%", st.Refused, st.Requests)
	}
}

// latencyQuota is the quota server's time per answer in these tests.
const latencyQuota = 50_000_000 // 50ms
