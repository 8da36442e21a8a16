package worker

import (
	"context"

	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/pricing"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/tracing"
)

// accounted opens models whose calls are priced where they run: each
// successful call's usage gets its cost at this worker's prices (or is
// marked unpriced), so the cost rides in model.Usage to the journal, the
// events and the records; its cached tokens and cost go on the call's
// chat span and to the metrics.
type accounted struct {
	inner  runner.ModelOpener
	prices *pricing.Table
	mx     *metrics.Metrics
}

func (a accounted) Open(ref string) (model.Model, error) {
	m, err := a.inner.Open(ref)
	if err != nil {
		return nil, err
	}
	r, _ := model.ParseRef(ref)
	price, ok := a.prices.Lookup(ref)
	return &accountedModel{Model: m, provider: r.Provider, name: r.Name, price: price, priced: ok, mx: a.mx}, nil
}

type accountedModel struct {
	model.Model
	provider, name string
	price          pricing.Price
	priced         bool
	mx             *metrics.Metrics
}

// Cost is what a call with usage u costs at this worker's price of the
// model, for a usd budget's estimate; ok is false when it has none.
func (m *accountedModel) Cost(u model.Usage) (usd float64, ok bool) {
	if !m.priced {
		return 0, false
	}
	return m.price.Cost(u), true
}

func (m *accountedModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	resp, err := m.Model.Generate(ctx, req)
	if err != nil {
		return resp, err
	}
	resp.Usage = pricing.Apply(m.price, m.priced, resp.Usage)
	cost := resp.Usage.Cost()
	tracing.ChatUsage(ctx, resp.Usage.CacheReadTokens, resp.Usage.CacheWriteTokens, cost)
	m.mx.ModelUsage(m.provider, m.name, resp.Usage.CacheReadTokens, resp.Usage.CacheWriteTokens, cost)
	return resp, nil
}
