package anthropic

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/internal/httpconf"
	"github.com/formica-run/formica/internal/model/internal/httperr"
)

const (
	// DefaultBaseURL is Anthropic's own API (without "/v1").
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultIdleTimeout fails an attempt that receives no byte for this
	// long, before the answer starts or mid-stream (the API sends pings
	// while it thinks, so only a stalled connection hits it).
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxRetries is how often a rate-limited or failed call is retried.
	DefaultMaxRetries = 4
	// DefaultRetryDelay is the first backoff; it doubles per retry.
	DefaultRetryDelay = 500 * time.Millisecond
	// DefaultMaxRetryDelay caps the computed backoff.
	DefaultMaxRetryDelay = 30 * time.Second
	// DefaultMaxTokens is sent when args set no max_tokens, which the API requires.
	DefaultMaxTokens = 4096
)

const provider = "anthropic"

// defaults is how New checks and completes a Config, as every HTTP provider does.
var defaults = httpconf.Provider{
	Name:          provider,
	ErrConfig:     ErrConfig,
	BaseURL:       DefaultBaseURL,
	KeyHost:       "api.anthropic.com",
	NoKey:         "Anthropic's API needs an API key (set ANTHROPIC_API_KEY)",
	IdleTimeout:   DefaultIdleTimeout,
	MaxRetries:    DefaultMaxRetries,
	RetryDelay:    DefaultRetryDelay,
	MaxRetryDelay: DefaultMaxRetryDelay,
}

// Config configures a Model. The zero value of every field means its default.
type Config struct {
	// Model is the model name used when a Request does not name one,
	// e.g. "claude-sonnet-4-5".
	Model string
	// BaseURL is the API root, without "/v1"; default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as x-api-key. It is required for Anthropic's own API and
	// optional for other base URLs (gateways that authenticate otherwise).
	APIKey string
	// HTTPClient sends the requests; default a client over http.DefaultTransport.
	HTTPClient *http.Client
	// IdleTimeout fails an HTTP attempt (retried as a server error) when no
	// byte arrives for this long, waiting for the answer or mid-stream;
	// default DefaultIdleTimeout. An answer that keeps streaming is never
	// cut: only ctx bounds the whole call.
	IdleTimeout time.Duration
	// Gate, when set, paces every HTTP attempt against the endpoint's quota
	// (see model.Gate); a 429 then waits in the gate, not in a backoff.
	// nil: no pacing.
	Gate model.Gate
	// MaxRetries bounds retries of 5xx (529 included), transport failures
	// and stalled attempts; default DefaultMaxRetries, negative for none.
	// 429s do not count: they are retried for as long as ctx allows.
	MaxRetries int
	// RetryDelay is the first backoff, doubling per retry; default DefaultRetryDelay.
	RetryDelay time.Duration
	// MaxRetryDelay caps the computed backoff; default DefaultMaxRetryDelay.
	MaxRetryDelay time.Duration
	// Logger receives retry warnings and per-call debug lines, never the key;
	// default discards.
	Logger *slog.Logger
}

// Model calls the Messages API. It is safe for concurrent use.
type Model struct {
	svc      anthropic.MessageService
	model    string
	backoff  model.Backoff
	log      *slog.Logger
	endpoint httperr.Endpoint
}

var _ model.Model = (*Model)(nil)

// New checks cfg and builds a Model; it makes no network call.
func New(cfg Config) (*Model, error) {
	s, err := defaults.Resolve(httpconf.Config{
		BaseURL:       cfg.BaseURL,
		APIKey:        cfg.APIKey,
		HTTPClient:    cfg.HTTPClient,
		IdleTimeout:   cfg.IdleTimeout,
		Gate:          cfg.Gate,
		MaxRetries:    cfg.MaxRetries,
		RetryDelay:    cfg.RetryDelay,
		MaxRetryDelay: cfg.MaxRetryDelay,
		Logger:        cfg.Logger,
	})
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
	return &Model{
		// NewMessageService, unlike NewClient, loads no ANTHROPIC_* variables
		// or profiles, so nothing but cfg reaches the wire.
		svc:     anthropic.NewMessageService(opts...),
		model:   cfg.Model,
		backoff: s.Backoff,
		log:     s.Logger,
		endpoint: httperr.Endpoint{Provider: provider, Secret: cfg.APIKey, IdleTimeout: s.IdleTimeout, Gate: s.Gate,
			NotFoundHint: httperr.BaseURLHint("the base URL (ANTHROPIC_BASE_URL)", s.BaseURL, false)},
	}, nil
}

// FromEnv builds a Model for modelName from ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL. A key is needed unless a base URL names another server.
func FromEnv(modelName string) (*Model, error) {
	base := strings.TrimSpace(os.Getenv("ANTHROPIC_BASE_URL"))
	key := strings.TrimSpace(os.Getenv("ANTHROPIC_API_KEY"))
	if base == "" && key == "" {
		return nil, fmt.Errorf("%w: ANTHROPIC_API_KEY is not set", ErrConfig)
	}
	return New(Config{Model: modelName, BaseURL: base, APIKey: key})
}

// Generate sends one streamed Messages request, retrying as the package
// doc says.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	params, dropped, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	m.log.LogAttrs(ctx, slog.LevelDebug, "messages",
		slog.String("model", params.Model), slog.Int("messages", len(params.Messages)),
		slog.Int("tools", len(params.Tools)), slog.Any("dropped_args", dropped))
	ask := httperr.AskFor(ctx, req)
	var out *anthropic.Message
	err = model.Retry(ctx, m.backoff, m.log, func(ctx context.Context) (time.Duration, error) {
		var err error
		var wait time.Duration
		out, wait, err = m.attempt(ctx, ask, params)
		return wait, err
	})
	if err != nil {
		return model.Response{}, err
	}
	return response(out)
}

// attempt makes one streamed HTTP request and reads the whole answer,
// gated and under the idle timeout, and classifies its failure.
func (m *Model) attempt(ctx context.Context, ask model.Ask, params anthropic.MessageNewParams) (*anthropic.Message, time.Duration, error) {
	return httperr.Attempt(ctx, m.endpoint, ask, func(ctx context.Context, x *httperr.Exchange) (*anthropic.Message, error) {
		stream := m.svc.NewStreaming(ctx, params, option.WithMiddleware(x.Middleware))
		defer stream.Close()
		msg, err := collect(stream, x)
		if err != nil {
			return nil, err
		}
		x.SetUsage(usage(msg.Usage))
		return msg, nil
	})
}
