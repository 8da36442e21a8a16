package openai_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/openai"
	"github.com/formica-run/formica/internal/tracing"
)

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  openai.Config
	}{
		{"OpenAI without a key", openai.Config{}},
		{"explicit OpenAI URL without a key", openai.Config{BaseURL: "https://api.openai.com/v1"}},
		{"relative URL", openai.Config{BaseURL: "localhost:11434/v1"}},
		{"other scheme", openai.Config{BaseURL: "ftp://example.com/v1"}},
		{"line break in key", openai.Config{BaseURL: "http://localhost/v1", APIKey: "sk-a\nX-Evil: 1"}},
		{"negative idle timeout", openai.Config{BaseURL: "http://localhost/v1", IdleTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := openai.New(tc.cfg); !errors.Is(err, openai.ErrConfig) {
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
		{"key only", "", "sk-test", true},
		{"local server without key", "http://localhost:11434/v1", "", true},
		{"both", "http://localhost:8000/v1", "token", true},
		{"bad base URL", "not a url", "sk-test", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_BASE_URL", tc.base)
			t.Setenv("OPENAI_API_KEY", tc.key)
			m, err := openai.FromEnv("gpt-4o")
			if tc.ok && (err != nil || m == nil) {
				t.Errorf("FromEnv = %v", err)
			}
			if !tc.ok && !errors.Is(err, openai.ErrConfig) {
				t.Errorf("FromEnv = %v, want ErrConfig", err)
			}
		})
	}
}

// A key in the environment must not reach a server that New was not given
// it for: a local model server should never see the OpenAI key.
func TestNewIgnoresEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_ORG_ID", "org-secret")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	var auth, org string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, org = r.Header.Get("Authorization"), r.Header.Get("OpenAI-Organization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if auth != "" || org != "" {
		t.Errorf("server saw Authorization %q and organization %q, want neither", auth, org)
	}
}

// A call made under a span carries its trace context (traceparent), so an
// OpenAI-compatible server that traces joins the run's trace.
func TestTraceparentSent(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "local"})
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if _, err := m.Generate(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
}

// A model call's chat span names the server it went to (server.address,
// server.port).
func TestChatSpanNamesTheServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "local"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tracing.StartChat(t.Context(), "openai", "local")
	if _, err := m.Generate(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	tracing.EndChat(span, "", "local", "stop", 1, 1, nil)
	u, _ := url.Parse(srv.URL)
	got := map[string]string{}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
	}
	if got["server.address"] != u.Hostname() || got["server.port"] != u.Port() {
		t.Errorf("chat span attributes %v; want server.address %s and server.port %s", got, u.Hostname(), u.Port())
	}
}
