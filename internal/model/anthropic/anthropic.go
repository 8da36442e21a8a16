package anthropic

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/formica-run/formica/internal/model"
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
	secret  string
}

var _ model.Model = (*Model)(nil)

// New checks cfg and builds a Model; it makes no network call.
func New(cfg Config) (*Model, error) {
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: BaseURL %q is not an http(s) URL", ErrConfig, base)
	}
	if cfg.APIKey == "" && u.Host == "api.anthropic.com" {
		return nil, fmt.Errorf("%w: Anthropic's API needs an API key (set ANTHROPIC_API_KEY)", ErrConfig)
	}
	if strings.ContainsAny(cfg.APIKey, "\r\n") {
		return nil, fmt.Errorf("%w: APIKey contains a line break", ErrConfig)
	}
	if cfg.Timeout < 0 || cfg.RetryDelay < 0 || cfg.MaxRetryDelay < 0 {
		return nil, fmt.Errorf("%w: negative Timeout, RetryDelay or MaxRetryDelay", ErrConfig)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
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
		timeout: orDefault(cfg.Timeout, DefaultTimeout),
		backoff: model.Backoff{
			MaxRetries: retries(cfg.MaxRetries),
			Base:       orDefault(cfg.RetryDelay, DefaultRetryDelay),
			Max:        orDefault(cfg.MaxRetryDelay, DefaultMaxRetryDelay),
		},
		log:    log.With("provider", provider),
		secret: cfg.APIKey,
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
	actx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var seen exchange
	out, err := m.svc.New(actx, params,
		option.WithMiddleware(seen.middleware),
		// An explicit timeout also stops the SDK from refusing large
		// max_tokens without streaming; ours (actx) is the same.
		option.WithRequestTimeout(m.timeout))
	if err == nil {
		return out, 0, nil
	}
	return nil, seen.retryAfter(), m.classify(ctx, actx, err, &seen)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func retries(n int) int {
	switch {
	case n == 0:
		return DefaultMaxRetries
	case n < 0:
		return 0
	}
	return n
}
