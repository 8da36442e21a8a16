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
	// DefaultIdleTimeout fails an attempt that receives no byte for this
	// long, before the answer starts or mid-stream. Answers stream, so a
	// long one is never cut; a local server that ignores stream and
	// computes the whole answer before sending a byte may need more.
	DefaultIdleTimeout = 60 * time.Second
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
	IdleTimeout:   DefaultIdleTimeout,
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
	// IdleTimeout fails an HTTP attempt (retried as a server error) when no
	// byte arrives for this long, waiting for the answer or mid-stream;
	// default DefaultIdleTimeout. An answer that keeps streaming is never
	// cut: only ctx bounds the whole call.
	IdleTimeout time.Duration
	// Gate, when set, paces every HTTP attempt against the endpoint's quota
	// (see model.Gate); a 429 then waits in the gate, not in a backoff.
	// nil: no pacing.
	Gate model.Gate
	// MaxRetries bounds retries of 5xx, transport failures and stalled
	// attempts; default DefaultMaxRetries, negative for none. 429s do not
	// count: they are retried for as long as ctx allows.
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
		endpoint: httperr.Endpoint{Provider: provider, Secret: cfg.APIKey, IdleTimeout: s.IdleTimeout, Gate: s.Gate,
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

// Generate sends one streamed Chat Completions request, retrying as the
// package doc says.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	m.log.LogAttrs(ctx, slog.LevelDebug, "chat completion",
		slog.String("model", params.Model), slog.Int("messages", len(params.Messages)),
		slog.Int("tools", len(params.Tools)))
	ask := httperr.AskFor(ctx, req)
	var out *openai.ChatCompletion
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
func (m *Model) attempt(ctx context.Context, ask model.Ask, params openai.ChatCompletionNewParams) (*openai.ChatCompletion, time.Duration, error) {
	return httperr.Attempt(ctx, m.endpoint, ask, func(ctx context.Context, x *httperr.Exchange) (*openai.ChatCompletion, error) {
		stream := m.svc.NewStreaming(ctx, params, option.WithMiddleware(x.Middleware))
		defer stream.Close()
		c, err := collect(stream, x)
		if err != nil {
			return nil, err
		}
		x.SetUsage(usage(c.Usage))
		return c, nil
	})
}
