package openai

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/internal/httpconf"
	"github.com/formica-run/formica/internal/model/internal/httperr"
)

const (
	// DefaultBaseURL is OpenAI's own API.
	DefaultBaseURL = "https://api.openai.com/v1"
	// DefaultTimeout bounds one HTTP attempt; long answers from slow local
	// models need minutes, so it is generous.
	DefaultTimeout = 10 * time.Minute
	// DefaultMaxRetries is how often a rate-limited or failed call is retried.
	DefaultMaxRetries = 4
	// DefaultRetryDelay is the first backoff; it doubles per retry.
	DefaultRetryDelay = 500 * time.Millisecond
	// DefaultMaxRetryDelay caps the computed backoff.
	DefaultMaxRetryDelay = 30 * time.Second
)

const provider = "openai"

// defaults is how New checks and completes a Config, as every HTTP provider does.
var defaults = httpconf.Provider{
	Name:          provider,
	ErrConfig:     ErrConfig,
	BaseURL:       DefaultBaseURL,
	KeyHost:       "api.openai.com",
	NoKey:         "OpenAI's API needs an API key (set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server)",
	Timeout:       DefaultTimeout,
	MaxRetries:    DefaultMaxRetries,
	RetryDelay:    DefaultRetryDelay,
	MaxRetryDelay: DefaultMaxRetryDelay,
}

// Config configures a Model. The zero value of every field means its default.
type Config struct {
	// Model is the model name used when a Request does not name one, e.g. "gpt-4o".
	Model string
	// BaseURL is the API root, up to and including "/v1"; default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token. It is required for OpenAI's own API and
	// optional elsewhere (local servers such as Ollama need none).
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

// Model calls a Chat Completions endpoint. It is safe for concurrent use.
type Model struct {
	svc      openai.ChatCompletionService
	model    string
	official bool // BaseURL is OpenAI's own API, which wants max_completion_tokens
	backoff  model.Backoff
	log      *slog.Logger
	errs     httperr.Classifier
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
		// NewChatCompletionService, unlike NewClient, reads no OPENAI_*
		// variables, so nothing but cfg reaches the wire.
		svc:      openai.NewChatCompletionService(opts...),
		model:    cfg.Model,
		official: s.Official,
		backoff:  s.Backoff,
		log:      s.Logger,
		errs: httperr.Classifier{Provider: provider, Secret: cfg.APIKey, Timeout: s.Timeout,
			NotFoundHint: httperr.BaseURLHint("the base URL (OPENAI_BASE_URL)", s.BaseURL, true)},
	}, nil
}

// FromEnv builds a Model for modelName from OPENAI_BASE_URL and
// OPENAI_API_KEY. A key is needed unless a base URL names another server.
func FromEnv(modelName string) (*Model, error) {
	base := strings.TrimSpace(os.Getenv("OPENAI_BASE_URL"))
	key := strings.TrimSpace(os.Getenv("OPENAI_API_KEY"))
	if base == "" && key == "" {
		return nil, fmt.Errorf("%w: neither OPENAI_API_KEY nor OPENAI_BASE_URL is set", ErrConfig)
	}
	return New(Config{Model: modelName, BaseURL: base, APIKey: key})
}

// Generate sends one Chat Completions request, retrying as the package doc says.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	m.log.LogAttrs(ctx, slog.LevelDebug, "chat completion",
		slog.String("model", params.Model), slog.Int("messages", len(params.Messages)),
		slog.Int("tools", len(params.Tools)))
	var out *openai.ChatCompletion
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
func (m *Model) attempt(ctx context.Context, params openai.ChatCompletionNewParams) (*openai.ChatCompletion, time.Duration, error) {
	return httperr.Attempt(ctx, m.errs, func(ctx context.Context, x *httperr.Exchange) (*openai.ChatCompletion, error) {
		return m.svc.New(ctx, params, option.WithMiddleware(x.Middleware))
	})
}
