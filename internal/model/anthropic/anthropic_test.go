package anthropic_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/anthropic"
)

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  anthropic.Config
	}{
		{"Anthropic without a key", anthropic.Config{}},
		{"relative URL", anthropic.Config{BaseURL: "localhost:8080"}},
		{"line break in key", anthropic.Config{APIKey: "k\r\nX-Evil: 1"}},
		{"negative retry delay", anthropic.Config{APIKey: "k", RetryDelay: -1}},
		{"negative idle timeout", anthropic.Config{APIKey: "k", IdleTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := anthropic.New(tc.cfg); !errors.Is(err, anthropic.ErrConfig) {
				t.Errorf("New = %v, want ErrConfig", err)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name, base, key string
		ok              bool
	}{
		{"neither", "", "", false},
		{"key only", "", "sk-ant-test", true},
		{"gateway without key", "http://localhost:4000", "", true},
		{"bad base URL", "::", "sk-ant-test", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ANTHROPIC_BASE_URL", tc.base)
			t.Setenv("ANTHROPIC_API_KEY", tc.key)
			m, err := anthropic.FromEnv("claude-sonnet-4-5")
			if tc.ok && (err != nil || m == nil) {
				t.Errorf("FromEnv = %v", err)
			}
			if !tc.ok && !errors.Is(err, anthropic.ErrConfig) {
				t.Errorf("FromEnv = %v, want ErrConfig", err)
			}
		})
	}
}

// New must not pick up the SDK's environment defaults: a key from
// ANTHROPIC_API_KEY may not reach a server New was not given it for.
func TestNewIgnoresEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	var key, auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, auth = r.Header.Get("X-Api-Key"), r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn"}`))
	}))
	defer srv.Close()
	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if key != "" || auth != "" {
		t.Errorf("server saw x-api-key %q and Authorization %q, want neither", key, auth)
	}
}

// The SDK refuses large max_tokens for a request that does not stream;
// requests stream, so big answers work (here from a server that answers
// in one JSON object all the same).
func TestLargeMaxTokens(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"message","content":[{"type":"text","text":"long"}]}`))
	}))
	defer srv.Close()
	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, Model: "claude-opus-4-1"})
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "essay"}}, Args: model.Args{"max_tokens": 64000}}
	if resp, err := m.Generate(t.Context(), req); err != nil || resp.Text != "long" {
		t.Errorf("Generate = %q, %v", resp.Text, err)
	}
}
