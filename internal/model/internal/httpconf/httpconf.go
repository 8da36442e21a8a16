// Package httpconf is the Config every HTTP model provider takes, and how
// it is checked and defaulted (base URL, key, HTTP client, idle timeout,
// gate, retries, logger) and its calls retried, so that each provider
// rejects, defaults and retries alike.
package httpconf

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/internal/httperr"
)

const (
	// DefaultIdleTimeout fails an attempt that receives no byte for this
	// long, before the answer starts or mid-stream. Answers stream, so a
	// long one is never cut (Anthropic sends pings while it thinks, so only
	// a stalled connection hits it); a local server that ignores stream and
	// computes the whole answer before sending a byte may need more.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxRetries is how often a rate-limited or failed call is retried.
	DefaultMaxRetries = 4
	// DefaultRetryDelay is the first backoff; it doubles per retry.
	DefaultRetryDelay = 500 * time.Millisecond
	// DefaultMaxRetryDelay caps the computed backoff.
	DefaultMaxRetryDelay = 30 * time.Second
)

// Provider is what differs between providers: their name, sentinel and own API.
type Provider struct {
	// Name is logged as the "provider" attribute and starts every error, e.g. "openai".
	Name string
	// ErrConfig is the provider's sentinel, wrapped by every rejection.
	ErrConfig error
	// BaseURL is the default API root.
	BaseURL string
	// KeyHost is the host of the provider's own API, which needs a key;
	// NoKey says so when the key is missing.
	KeyHost, NoKey string
	// BaseURLEnv names the base URL's setting in a 404's hint; WantV1 says
	// whether the base URL must end in /v1 (see httperr.BaseURLHint).
	BaseURLEnv string
	WantV1     bool
}

// Config configures a provider's Model. The zero value of every field means
// its default.
type Config struct {
	// Model is the model name used when a Request does not name one,
	// e.g. "gpt-4o" or "claude-sonnet-4-5".
	Model string
	// BaseURL is the API root; default the provider's DefaultBaseURL.
	// OpenAI's includes "/v1", Anthropic's does not.
	BaseURL string
	// APIKey is sent as a bearer token (OpenAI) or as x-api-key
	// (Anthropic). It is required for the provider's own API and optional
	// elsewhere (local servers such as Ollama need none, gateways may
	// authenticate otherwise).
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
	// MaxRetries bounds retries of 5xx (Anthropic's 529 included),
	// transport failures and stalled attempts; default DefaultMaxRetries,
	// negative for none. 429s do not count: they are retried for as long
	// as ctx allows.
	MaxRetries int
	// RetryDelay is the first backoff, doubling per retry; default DefaultRetryDelay.
	RetryDelay time.Duration
	// MaxRetryDelay caps the computed backoff; default DefaultMaxRetryDelay.
	MaxRetryDelay time.Duration
	// Logger receives retry warnings and per-call debug lines, never the key;
	// default discards.
	Logger *slog.Logger
}

// Settings is a checked Config with the defaults in place.
type Settings struct {
	// BaseURL is the trimmed http(s) API root.
	BaseURL string
	// Official reports whether BaseURL is the provider's own API (KeyHost).
	Official   bool
	HTTPClient *http.Client
	// Endpoint makes the attempts: gated, under the idle timeout, the key
	// redacted from their errors.
	Endpoint httperr.Endpoint
	// Backoff is Gated when Endpoint.Gate is set.
	Backoff model.Backoff
	// Logger carries the provider's name; it discards when Config had none.
	Logger *slog.Logger
}

// Resolve checks c and fills in p's defaults. Errors wrap p.ErrConfig.
func (p Provider) Resolve(c Config) (Settings, error) {
	base := cmp.Or(strings.TrimSpace(c.BaseURL), p.BaseURL)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Settings{}, fmt.Errorf("%w: BaseURL %q is not an http(s) URL", p.ErrConfig, base)
	}
	official := u.Host == p.KeyHost
	if c.APIKey == "" && official {
		return Settings{}, fmt.Errorf("%w: %s", p.ErrConfig, p.NoKey)
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		return Settings{}, fmt.Errorf("%w: APIKey contains a line break", p.ErrConfig)
	}
	if c.IdleTimeout < 0 || c.RetryDelay < 0 || c.MaxRetryDelay < 0 {
		return Settings{}, fmt.Errorf("%w: negative IdleTimeout, RetryDelay or MaxRetryDelay", p.ErrConfig)
	}
	return Settings{
		BaseURL:    base,
		Official:   official,
		HTTPClient: cmp.Or(c.HTTPClient, &http.Client{Transport: http.DefaultTransport}),
		Endpoint: httperr.Endpoint{Provider: p.Name, Secret: c.APIKey, Gate: c.Gate,
			IdleTimeout:  cmp.Or(c.IdleTimeout, DefaultIdleTimeout),
			NotFoundHint: httperr.BaseURLHint("the base URL ("+p.BaseURLEnv+")", base, p.WantV1)},
		Backoff: model.Backoff{
			// Zero: the default; negative: none.
			MaxRetries: max(cmp.Or(c.MaxRetries, DefaultMaxRetries), 0),
			Base:       cmp.Or(c.RetryDelay, DefaultRetryDelay),
			Max:        cmp.Or(c.MaxRetryDelay, DefaultMaxRetryDelay),
			Gated:      c.Gate != nil,
		},
		Logger: cmp.Or(c.Logger, slog.New(slog.DiscardHandler)).With("provider", p.Name),
	}, nil
}

// Call makes the call of req: attempts of send (httperr.Attempt, which
// says what send must do) retried by model.Retry with s.Backoff.
func Call[T any](ctx context.Context, s Settings, req model.Request, send func(context.Context, *httperr.Exchange) (T, error)) (T, error) {
	ask := httperr.AskFor(ctx, req)
	var out T
	err := model.Retry(ctx, s.Backoff, s.Logger, func(ctx context.Context) (wait time.Duration, err error) {
		out, wait, err = httperr.Attempt(ctx, s.Endpoint, ask, send)
		return wait, err
	})
	return out, err
}
