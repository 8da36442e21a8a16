package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/model/quotaserver"
)

// QuotaCase is one fan-out against a provider with a quota.
type QuotaCase struct {
	// Limits says how the run knew the quota: "learned" (from the
	// provider's headers) or "declared" (in the providers file).
	Limits     string  `json:"limits"`
	Helpers    int     `json:"helpers"`
	Failed     int     `json:"helpers_failed"`
	Requests   int     `json:"requests"`
	Refused    int     `json:"refused"`
	IdealMs    float64 `json:"ideal_ms"`
	MakespanMs float64 `json:"makespan_ms"`
	Ratio      float64 `json:"ratio"`
}

// Quota is the quota scenario: a fan-out over Workers workers against a
// local OpenAI-compatible server that enforces a quota.
type Quota struct {
	RequestsPerMinute int         `json:"requests_per_minute"`
	Burst             int         `json:"burst"`
	InFlight          int         `json:"in_flight"`
	LatencyMs         float64     `json:"latency_ms"`
	Workers           int         `json:"workers"`
	Cases             []QuotaCase `json:"cases"`
}

// quota: QuotaHelpers helpers over Workers workers against a server allowing
// QuotaRPM requests a minute (burst 10, 16 in flight, QuotaLatency each),
// once learning the quota from the server's headers and once with it
// declared.
func (b *suite) quota(ctx context.Context, res *Result) error {
	set := b.set
	q := &Quota{RequestsPerMinute: set.QuotaRPM, Burst: 10, InFlight: 16, LatencyMs: ms(set.QuotaLatency), Workers: set.Workers}
	learned, err := b.quotaCase(ctx, q, false)
	if err != nil {
		return err
	}
	declared, err := b.quotaCase(ctx, q, true)
	if err != nil {
		return err
	}
	q.Cases = []QuotaCase{learned, declared}
	res.Quota, res.QuotaLearnedRatio, res.QuotaDeclaredRatio = q, ptr(learned.Ratio), ptr(declared.Ratio)
	return nil
}

func (b *suite) quotaCase(ctx context.Context, q *Quota, declared bool) (QuotaCase, error) {
	set := b.set
	srvCfg := quotaserver.Config{Format: quotaserver.OpenAI, RequestsPerMinute: q.RequestsPerMinute,
		Burst: q.Burst, MaxInFlight: q.InFlight, Latency: set.QuotaLatency, Signals: quotaserver.SignalHeaders}
	srv, err := quotaserver.Start(srvCfg)
	if err != nil {
		return QuotaCase{}, err
	}
	defer srv.Close()
	file := fmt.Sprintf("endpoints:\n  bench:\n    format: openai\n    base_url: %s\n", srv.BaseURL())
	c := QuotaCase{Limits: "learned", Helpers: set.QuotaHelpers}
	if declared {
		c.Limits = "declared"
		file += fmt.Sprintf("    requests_per_minute: %d\n    burst: %d\n    in_flight: %d\n", q.RequestsPerMinute, q.Burst, q.InFlight)
	}
	eps, err := providers.Parse([]byte(file), nil)
	if err != nil {
		return c, err
	}
	b.logf("   %d helpers, quota %d/min (burst %d, %d in flight), %s limits", c.Helpers, q.RequestsPerMinute, q.Burst, q.InFlight, c.Limits)
	cl, err := b.startCluster(ctx, false, set.Workers, set.Slots, &providers.Opener{Endpoints: eps})
	if err != nil {
		return c, err
	}
	defer cl.stop()
	root := rootAgent(true, 0)
	root.Model = "bench/model"
	start := time.Now()
	rec, err := cl.run(ctx, runOpts{task: fmt.Sprintf("fanout %d", c.Helpers), agent: root,
		limits: limits.Config{MaxThreads: c.Helpers}})
	span := time.Since(start)
	if err != nil {
		return c, err
	}
	for _, th := range rec.Threads {
		if th.Depth == 1 && th.Status != event.Succeeded {
			c.Failed++
		}
	}
	st := srv.Stats()
	c.Requests, c.Refused = st.Requests, st.Refused
	ideal := srvCfg.FanoutIdeal(c.Helpers)
	c.IdealMs, c.MakespanMs = ms(ideal), ms(span)
	c.Ratio = round(float64(span)/float64(ideal), 3)
	return c, nil
}
