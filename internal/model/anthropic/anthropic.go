package anthropic

import (
	"context"
	"log/slog"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/internal/httpconf"
	"github.com/formica-run/formica/internal/model/internal/httperr"
)

const (
	// DefaultBaseURL is Anthropic's own API (without "/v1").
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultMaxTokens is sent when args set no max_tokens, which the API requires.
	DefaultMaxTokens = 4096
)

const provider = "anthropic"

// defaults is how New checks and completes a Config, as every HTTP provider does.
var defaults = httpconf.Provider{
	Name:       provider,
	ErrConfig:  ErrConfig,
	BaseURL:    DefaultBaseURL,
	KeyHost:    "api.anthropic.com",
	NoKey:      "Anthropic's API needs an API key (set ANTHROPIC_API_KEY)",
	BaseURLEnv: "ANTHROPIC_BASE_URL",
}

// Config configures a Model, as every HTTP provider's (httpconf.Config):
// BaseURL is the API root, without "/v1"; APIKey is sent as x-api-key,
// required for Anthropic's own API only (gateways may authenticate
// otherwise).
type Config = httpconf.Config

// Model calls the Messages API. It is safe for concurrent use.
type Model struct {
	svc   anthropic.MessageService
	model string
	http  httpconf.Settings
}

var _ model.Model = (*Model)(nil)

// New checks cfg and builds a Model; it makes no network call.
func New(cfg Config) (*Model, error) {
	s, err := defaults.Resolve(cfg)
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithBaseURL(s.BaseURL),
		option.WithHTTPClient(s.HTTPClient),
		option.WithMaxRetries(0), // model.Retry owns retries; see doc.go
		// The call's span is the runner's chat span (tokens, cost, server)
		// and its trace context goes with every request (httperr): the
		// SDK's own span would count each call's tokens a second time.
		option.WithoutOpenTelemetry(),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// NewMessageService, unlike NewClient, loads no ANTHROPIC_* variables
	// or profiles, so nothing but cfg reaches the wire.
	return &Model{svc: anthropic.NewMessageService(opts...), model: cfg.Model, http: s}, nil
}

// Generate sends one streamed Messages request, retrying as the package
// doc says.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	params, dropped, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	m.http.Logger.LogAttrs(ctx, slog.LevelDebug, "messages",
		slog.String("model", params.Model), slog.Int("messages", len(params.Messages)),
		slog.Int("tools", len(params.Tools)), slog.Any("dropped_args", dropped))
	out, err := httpconf.Call(ctx, m.http, req, func(ctx context.Context, x *httperr.Exchange) (*anthropic.Message, error) {
		stream := m.svc.NewStreaming(ctx, params, option.WithMiddleware(x.Middleware))
		defer stream.Close()
		msg, err := collect(stream, x)
		if err != nil {
			return nil, err
		}
		x.SetUsage(usage(msg.Usage))
		return msg, nil
	})
	if err != nil {
		return model.Response{}, err
	}
	return response(out)
}
