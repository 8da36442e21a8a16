package embedded

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/model/quotaserver"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
)

// The quota tests run a provider allowing quotaRPM requests a minute
// (burst 10, 16 in flight, quotaLatency an answer): the shape of an
// ordinary 600 a minute, five times faster, so each run lasts seconds.
const (
	quotaRPM     = 3000
	quotaBurst   = 10
	quotaLatency = 60 * time.Millisecond
)

// quotaStack starts a quota server and a stack of two workers of 16 slots
// whose endpoint "q" is that server, with the limits given (extra lines of
// the endpoint's entry in the providers file).
func quotaStack(t *testing.T, cfg quotaserver.Config, limits string) (*quotaserver.Server, *oneshot.Client) {
	t.Helper()
	cfg.RequestsPerMinute, cfg.Burst, cfg.MaxInFlight, cfg.Latency = quotaRPM, quotaBurst, 16, quotaLatency
	srv, err := quotaserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	file := fmt.Sprintf("endpoints:\n  q:\n    format: %s\n    base_url: %s\n%s", cfg.Format, srv.BaseURL(), limits)
	eps, err := providers.Parse([]byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A second's heartbeat: nothing here waits on a loss, and a machine
	// loaded enough to hold a coordinator's beats for 600 ms would
	// otherwise end its placements as lapsed.
	_, cl := startStackOf(t, Config{Workers: 2, Slots: 16, Models: &providers.Opener{Endpoints: eps}, HeartbeatInterval: time.Second})
	return srv, cl
}

// fanoutRun is a run whose root, on endpoint q, spawns n helpers at once.
func fanoutRun(t *testing.T, n int) wire.RunSubmit {
	parallel := true
	root := spec.Agent{Name: "root", Model: "q/model", Tools: []string{tools.AgentToolName}, ParallelToolCalls: &parallel}
	return wire.RunSubmit{RunID: uuid.NewString(), Task: fmt.Sprintf("fanout %d", n), Agent: root,
		Limits: limits.Config{MaxThreads: n + 1}, Cwd: t.TempDir()}
}

// allSucceeded fails the test unless the run and its n helpers succeeded
// and the root collected every result.
func allSucceeded(t *testing.T, rec record.Run, n int) {
	t.Helper()
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s", rec.Status, rec.Error)
	}
	failed := 0
	for _, th := range rec.Threads {
		if th.Depth == 1 && th.Status != event.Succeeded {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d helpers failed", failed, n)
	}
	if want := fmt.Sprintf("collected %d results, %d done", n, n); !strings.HasPrefix(rec.Output, want) {
		t.Errorf("output %q, want %q", rec.Output, want)
	}
}

// logFigures logs what the provider saw of a fan-out of n that took took,
// against the quota's ideal, and returns it.
func logFigures(t *testing.T, srv *quotaserver.Server, took time.Duration, n int) quotaserver.Stats {
	t.Helper()
	st := srv.Stats()
	ideal := quotaserver.Config{RequestsPerMinute: quotaRPM, Burst: quotaBurst, Latency: quotaLatency}.FanoutIdeal(n)
	t.Logf("%d requests, %d refused; %v against the quota's ideal %v (%.2f×)", st.Requests, st.Refused,
		took.Round(time.Millisecond), ideal, float64(took)/float64(ideal))
	return st
}

// TestQuotaLearnedFromHeaders: 200 helpers at once against a provider
// that sends its rate-limit headers, nothing declared: every helper
// succeeds and at most 5% of requests are refused. Both wire formats; the
// OpenAI server takes streamed requests only.
func TestQuotaLearnedFromHeaders(t *testing.T) {
	for _, format := range []quotaserver.Format{quotaserver.OpenAI, quotaserver.Anthropic} {
		t.Run(string(format), func(t *testing.T) {
			srv, cl := quotaStack(t, quotaserver.Config{Format: format, Signals: quotaserver.SignalHeaders,
				StreamOnly: format == quotaserver.OpenAI}, "")
			const n = 200
			start := time.Now()
			rec := runAsync(t, context.Background(), cl, fanoutRun(t, n), nil)()
			took := time.Since(start)
			allSucceeded(t, rec, n)
			st := logFigures(t, srv, took, n)
			if st.Refused*20 > st.Requests {
				t.Errorf("%d of %d requests refused, want at most 5%%", st.Refused, st.Requests)
			}
		})
	}
}

// TestQuotaDeclared: with the server's limits declared, the calls go at
// the quota's pace and (almost) none is refused: the limiter never grants
// past the declared limits, but on a machine starved of CPU two calls
// granted apart can reach the server together, and the server judges by
// arrival. At most 2% are refused (and retried: every helper succeeds).
func TestQuotaDeclared(t *testing.T) {
	srv, cl := quotaStack(t, quotaserver.Config{Format: quotaserver.OpenAI, Signals: quotaserver.SignalBare},
		fmt.Sprintf("    requests_per_minute: %d\n    burst: %d\n    in_flight: 16\n", quotaRPM, quotaBurst))
	const n = 150
	start := time.Now()
	rec := runAsync(t, context.Background(), cl, fanoutRun(t, n), nil)()
	took := time.Since(start)
	allSucceeded(t, rec, n)
	st := logFigures(t, srv, took, n)
	if st.Refused*50 > st.Requests {
		t.Errorf("%d of %d requests refused, want at most 2%%", st.Refused, st.Requests)
	}
}

// TestQuotaFairAcrossRuns: a 5-wide run started while a 200-wide one
// waits for the quota is served beside it, not after it.
func TestQuotaFairAcrossRuns(t *testing.T) {
	_, cl := quotaStack(t, quotaserver.Config{Format: quotaserver.OpenAI, Signals: quotaserver.SignalHeaders}, "")
	bigWaiting := make(chan struct{})
	var once sync.Once
	big := fanoutRun(t, 200)
	bigDone := runAsync(t, context.Background(), cl, big, event.SinkFunc(func(e event.Event) {
		if e.Type == event.ModelWaiting && e.Status == event.Waiting {
			once.Do(func() { close(bigWaiting) })
		}
	}))
	select {
	case <-bigWaiting:
	case <-time.After(runTimeout):
		t.Fatal("the big run never waited for the quota")
	}
	small := runAsync(t, context.Background(), cl, fanoutRun(t, 5), nil)()
	smallEnd := time.Now()
	allSucceeded(t, small, 5)
	bigRec := bigDone()
	bigEnd := time.Now()
	allSucceeded(t, bigRec, 200)
	if !smallEnd.Before(bigEnd) {
		t.Errorf("the small run ended %v after the big one", smallEnd.Sub(bigEnd))
	}
}
