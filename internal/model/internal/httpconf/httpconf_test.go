package httpconf

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/internal/httperr"
)

var errConfig = errors.New("invalid acme config")

var acme = Provider{
	Name:       "acme",
	ErrConfig:  errConfig,
	BaseURL:    "https://api.acme.test/v1",
	KeyHost:    "api.acme.test",
	NoKey:      "Acme's API needs an API key",
	BaseURLEnv: "ACME_BASE_URL",
	WantV1:     true,
}

func TestResolveDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Config
		want Settings
	}{
		{
			name: "zero fields take the defaults",
			in:   Config{APIKey: "k"},
			want: Settings{
				BaseURL: "https://api.acme.test/v1", Official: true,
				Endpoint: httperr.Endpoint{Provider: "acme", Secret: "k", IdleTimeout: time.Minute},
				Backoff:  model.Backoff{MaxRetries: 4, Base: 500 * time.Millisecond, Max: 30 * time.Second},
			},
		},
		{
			name: "set fields are kept",
			in: Config{
				BaseURL: "  http://localhost:8080/v1 ", IdleTimeout: time.Second,
				MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: time.Hour,
			},
			want: Settings{
				BaseURL:  "http://localhost:8080/v1",
				Endpoint: httperr.Endpoint{Provider: "acme", IdleTimeout: time.Second},
				Backoff:  model.Backoff{MaxRetries: 2, Base: time.Millisecond, Max: time.Hour},
			},
		},
		{
			name: "negative MaxRetries means none",
			in:   Config{BaseURL: "http://localhost", MaxRetries: -1},
			want: Settings{
				BaseURL: "http://localhost",
				Endpoint: httperr.Endpoint{Provider: "acme", IdleTimeout: time.Minute,
					NotFoundHint: "the base URL (ACME_BASE_URL) http://localhost does not end in /v1, which such servers usually need: try http://localhost/v1"},
				Backoff: model.Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := acme.Resolve(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.HTTPClient == nil || got.Logger == nil {
				t.Errorf("HTTPClient %v, Logger %v: want defaults", got.HTTPClient, got.Logger)
			}
			got.HTTPClient, got.Logger = nil, nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveKeepsClientAndNamesLogger(t *testing.T) {
	hc := &http.Client{}
	var buf bytes.Buffer
	s, err := acme.Resolve(Config{APIKey: "k", HTTPClient: hc, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if s.HTTPClient != hc {
		t.Error("HTTPClient replaced")
	}
	s.Logger.Info("hi")
	if !strings.Contains(buf.String(), "provider=acme") {
		t.Errorf("log line %q lacks provider=acme", buf.String())
	}
}

func TestResolveRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Config
		msg  string
	}{
		{"own API without a key", Config{}, "Acme's API needs an API key"},
		{"relative URL", Config{BaseURL: "localhost:8080"}, `BaseURL "localhost:8080" is not an http(s) URL`},
		{"other scheme", Config{BaseURL: "ftp://example.com"}, `BaseURL "ftp://example.com" is not an http(s) URL`},
		{"unparsable URL", Config{BaseURL: "::"}, `BaseURL "::" is not an http(s) URL`},
		{"line break in key", Config{APIKey: "k\r\nX-Evil: 1"}, "APIKey contains a line break"},
		{"negative idle timeout", Config{APIKey: "k", IdleTimeout: -1}, "negative IdleTimeout, RetryDelay or MaxRetryDelay"},
		{"negative retry delay", Config{APIKey: "k", RetryDelay: -1}, "negative IdleTimeout, RetryDelay or MaxRetryDelay"},
		{"negative max retry delay", Config{APIKey: "k", MaxRetryDelay: -1}, "negative IdleTimeout, RetryDelay or MaxRetryDelay"},
		{"missing key is reported first", Config{IdleTimeout: -1}, "Acme's API needs an API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := acme.Resolve(tc.in)
			if !errors.Is(err, errConfig) {
				t.Fatalf("Resolve = %v, want errConfig", err)
			}
			if diff := cmp.Diff("invalid acme config: "+tc.msg, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

type gate struct{}

func (gate) Take(context.Context, model.Ask) (model.Ticket, error) { return nil, nil }

// A gate waits out 429s itself, so the backoff must not wait too.
func TestResolveGate(t *testing.T) {
	s, err := acme.Resolve(Config{APIKey: "k", Gate: gate{}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Endpoint.Gate != (gate{}) || !s.Backoff.Gated {
		t.Errorf("Gate %v, Backoff %+v: want the gate, Gated", s.Endpoint.Gate, s.Backoff)
	}
	if s, _ := acme.Resolve(Config{APIKey: "k"}); s.Endpoint.Gate != nil || s.Backoff.Gated {
		t.Errorf("without a gate: Gate %v, Backoff %+v", s.Endpoint.Gate, s.Backoff)
	}
}
