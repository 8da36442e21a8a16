package providers

import (
	"context"
	"log/slog"
	"strings"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/anthropic"
	"github.com/formica-run/formica/internal/model/internal/httpconf"
	"github.com/formica-run/formica/internal/model/openai"
	"github.com/formica-run/formica/internal/quota"
)

// Gates hands out the gate of an endpoint's quota. A worker's gates share
// each endpoint's quota with the whole cluster, through the coordinator.
type Gates interface {
	Gate(ep Endpoint) model.Gate
}

type gatesKey struct{}

// WithGates returns ctx whose model calls take their quota from g rather
// than from the quota this process keeps.
func WithGates(ctx context.Context, g Gates) context.Context {
	return context.WithValue(ctx, gatesKey{}, g)
}

// localQuotas are the quotas of calls made outside a worker (library use):
// one per endpoint for this whole process.
var localQuotas = quota.NewRegistry()

// endpointGate is the gate of one endpoint's models: the cluster's when the
// call's context has Gates, else this process's.
type endpointGate struct {
	ep Endpoint
}

func (g endpointGate) Take(ctx context.Context, ask model.Ask) (model.Ticket, error) {
	if gs, ok := ctx.Value(gatesKey{}).(Gates); ok {
		return gs.Gate(g.ep).Take(ctx, ask)
	}
	return localQuotas.Limiter(g.ep.Key(), g.ep.Limits).Take(ctx, ask)
}

// openEndpoint builds the model name on endpoint ep, its key read through
// getenv.
func openEndpoint(ep Endpoint, name string, getenv func(string) string, log *slog.Logger) (model.Model, error) {
	key := ""
	if ep.KeyEnv != "" {
		key = strings.TrimSpace(getenv(ep.KeyEnv))
	}
	cfg := httpconf.Config{Model: name, BaseURL: ep.BaseURL, APIKey: key,
		IdleTimeout: ep.IdleTimeout, Gate: endpointGate{ep}, Logger: log}
	if ep.Format == FormatAnthropic {
		return anthropic.New(cfg)
	}
	return openai.New(cfg)
}
