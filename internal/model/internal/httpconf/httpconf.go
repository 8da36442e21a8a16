// Package httpconf checks and defaults the Config fields every HTTP model
// provider shares (base URL, key, HTTP client, idle timeout, gate, retries,
// logger), so
// that each provider rejects and defaults them alike.
package httpconf

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// Provider is what differs between providers: their name, sentinel, own API
// and defaults.
type Provider struct {
	// Name is logged as the "provider" attribute, e.g. "openai".
	Name string
	// ErrConfig is the provider's sentinel, wrapped by every rejection.
	ErrConfig error
	// BaseURL is the default API root.
	BaseURL string
	// KeyHost is the host of the provider's own API, which needs a key;
	// NoKey says so when the key is missing.
	KeyHost, NoKey string
	// IdleTimeout, MaxRetries, RetryDelay and MaxRetryDelay replace the
	// zero Config fields of the same names.
	IdleTimeout               time.Duration
	MaxRetries                int
	RetryDelay, MaxRetryDelay time.Duration
}

// Config holds the shared fields of a provider's Config, which documents them.
type Config struct {
	BaseURL                   string
	APIKey                    string
	HTTPClient                *http.Client
	IdleTimeout               time.Duration
	Gate                      model.Gate
	MaxRetries                int
	RetryDelay, MaxRetryDelay time.Duration
	Logger                    *slog.Logger
}

// Settings is a checked Config with the defaults in place.
type Settings struct {
	// BaseURL is the trimmed http(s) API root.
	BaseURL string
	// Official reports whether BaseURL is the provider's own API (KeyHost).
	Official   bool
	HTTPClient *http.Client
	// IdleTimeout fails an attempt that receives no byte for that long.
	IdleTimeout time.Duration
	// Gate paces the attempts; nil when none does.
	Gate model.Gate
	// Backoff is Gated when Gate is set.
	Backoff model.Backoff
	// Logger carries the provider's name; it discards when Config had none.
	Logger *slog.Logger
}

// Resolve checks c and fills in p's defaults. Errors wrap p.ErrConfig.
func (p Provider) Resolve(c Config) (Settings, error) {
	base := strings.TrimSpace(c.BaseURL)
	if base == "" {
		base = p.BaseURL
	}
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
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport}
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Settings{
		BaseURL:     base,
		Official:    official,
		HTTPClient:  hc,
		IdleTimeout: orDefault(c.IdleTimeout, p.IdleTimeout),
		Gate:        c.Gate,
		Backoff: model.Backoff{
			MaxRetries: p.retries(c.MaxRetries),
			Base:       orDefault(c.RetryDelay, p.RetryDelay),
			Max:        orDefault(c.MaxRetryDelay, p.MaxRetryDelay),
			Gated:      c.Gate != nil,
		},
		Logger: log.With("provider", p.Name),
	}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// retries is n, p.MaxRetries for zero, or none for negative n.
func (p Provider) retries(n int) int {
	switch {
	case n == 0:
		return p.MaxRetries
	case n < 0:
		return 0
	}
	return n
}
