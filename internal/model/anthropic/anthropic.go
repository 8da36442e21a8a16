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
	// DefaultTimeout bounds one HTTP attempt.
	DefaultTimeout = 10 * time.Minute
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
	Timeout:       DefaultTimeout,
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
	// Timeout bounds each HTTP attempt, not the whole call (ctx does that);
	// default DefaultTimeout.
	Timeout time.Duration
	// MaxRetries bounds retries of 429, 5xx, transport failures and timed-out
	// attempts; default DefaultMaxRetries, negative for none.
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
	svc     anthropic.MessageService
	model   string
	timeout time.Duration
	backoff model.Backoff
	log     *slog.Logger
	errs    httperr.Classifier
}

var _ model.Model = (*Model)(nil)

// New checks cfg and builds a Model; it makes no network call.
func New(cfg Config) (*Model, error) {
	s, err := defaults.Resolve(httpconf.Config{
		BaseURL:       cfg.BaseURL,
		APIKey:        cfg.APIKey,
		HTTPClient:    cfg.HTTPClient,
		Timeout:       cfg.Timeout,
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
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Model{
		// NewMessageService, unlike NewClient, loads no ANTHROPIC_* variables
		// or profiles, so nothing but cfg reaches the wire.
		svc:     anthropic.NewMessageService(opts...),
		model:   cfg.Model,
		timeout: s.Timeout,
		backoff: s.Backoff,
		log:     s.Logger,
		errs: httperr.Classifier{Provider: provider, Secret: cfg.APIKey, Timeout: s.Timeout,
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

// Generate sends one Messages request, retrying as the package doc says.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	params, dropped, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	m.log.LogAttrs(ctx, slog.LevelDebug, "messages",
		slog.String("model", params.Model), slog.Int("messages", len(params.Messages)),
		slog.Int("tools", len(params.Tools)), slog.Any("dropped_args", dropped))
	var out *anthropic.Message
	err = model.Retry(ctx, m.backoff, m.log, func(ctx context.Context) (time.Duration, error) {
		var err error
		var wait time.Duration
		out, wait, err = m.attempt(ctx, params)
		return wait, err
	})
	if err != nil {
		return model.Response{}, err
	}
	return response(out)
}

// attempt makes one HTTP request under its own timeout and classifies its failure.
func (m *Model) attempt(ctx context.Context, params anthropic.MessageNewParams) (*anthropic.Message, time.Duration, error) {
	return httperr.Attempt(ctx, m.errs, func(ctx context.Context, x *httperr.Exchange) (*anthropic.Message, error) {
		return m.svc.New(ctx, params,
			option.WithMiddleware(x.Middleware),
			// An explicit timeout also stops the SDK from refusing large
			// max_tokens without streaming; ours (Attempt's) is the same.
			option.WithRequestTimeout(m.timeout))
	})
}
