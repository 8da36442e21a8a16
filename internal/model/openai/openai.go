package openai

import (
	"context"
	"log/slog"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/internal/httpconf"
	"github.com/formica-run/formica/internal/model/internal/httperr"
)

// DefaultBaseURL is OpenAI's own API.
const DefaultBaseURL = "https://api.openai.com/v1"

const provider = "openai"

// defaults is how New checks and completes a Config, as every HTTP provider does.
var defaults = httpconf.Provider{
	Name:       provider,
	ErrConfig:  ErrConfig,
	BaseURL:    DefaultBaseURL,
	KeyHost:    "api.openai.com",
	NoKey:      "OpenAI's API needs an API key (set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server)",
	BaseURLEnv: "OPENAI_BASE_URL",
	WantV1:     true,
}

// Config configures a Model, as every HTTP provider's (httpconf.Config):
// BaseURL is the API root, up to and including "/v1"; APIKey is sent as
// a bearer token, required for OpenAI's own API only.
type Config = httpconf.Config

// Model calls a Chat Completions endpoint. It is safe for concurrent use.
type Model struct {
	svc   openai.ChatCompletionService
	model string
	// http.Official: BaseURL is OpenAI's own API, which wants max_completion_tokens.
	http httpconf.Settings
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
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// NewChatCompletionService, unlike NewClient, reads no OPENAI_*
	// variables, so nothing but cfg reaches the wire.
	return &Model{svc: openai.NewChatCompletionService(opts...), model: cfg.Model, http: s}, nil
}

// Generate sends one streamed Chat Completions request, retrying as the
// package doc says.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	m.http.Logger.LogAttrs(ctx, slog.LevelDebug, "chat completion",
		slog.String("model", params.Model), slog.Int("messages", len(params.Messages)),
		slog.Int("tools", len(params.Tools)))
	out, err := httpconf.Call(ctx, m.http, req, func(ctx context.Context, x *httperr.Exchange) (*openai.ChatCompletion, error) {
		stream := m.svc.NewStreaming(ctx, params, option.WithMiddleware(x.Middleware))
		defer stream.Close()
		c, err := collect(stream, x)
		if err != nil {
			return nil, err
		}
		x.SetUsage(usage(c.Usage))
		return c, nil
	})
	if err != nil {
		return model.Response{}, err
	}
	return response(out)
}
