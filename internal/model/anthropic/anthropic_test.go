package anthropic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/anthropic"
	"github.com/formica-run/formica/internal/tracing"
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

// On the wire: a thread's third call carries four cache_control
// breakpoints (the last tool, the system prompt, the end of the previous
// request's conversation, the end of this one), and the cached tokens of
// the streamed answer come back apart, inside the input count.
func TestPromptCacheOnTheWire(t *testing.T) {
	type block struct {
		Type         string          `json:"type"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	var (
		where []string
		ccs   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			System   []block `json:"system"`
			Tools    []block `json:"tools"`
			Messages []struct {
				Role    string  `json:"role"`
				Content []block `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("decoding the request: %v", err)
		}
		note := func(at string, b block) {
			if b.CacheControl != nil {
				where, ccs = append(where, at), append(ccs, string(b.CacheControl))
			}
		}
		for i, b := range body.Tools {
			note(fmt.Sprintf("tools[%d]", i), b)
		}
		for i, b := range body.System {
			note(fmt.Sprintf("system[%d]", i), b)
		}
		for i, m := range body.Messages {
			for j, b := range m.Content {
				note(fmt.Sprintf("%s[%d].%s[%d]", m.Role, i, b.Type, j), b)
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,` +
				`"usage":{"input_tokens":12,"cache_creation_input_tokens":340,"cache_read_input_tokens":4100,"output_tokens":1}}}`,
			`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"done"}}`,
			`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`,
			`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
		} {
			fmt.Fprintf(w, "%s\n\n", ev)
		}
	}))
	defer srv.Close()
	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Model: "claude-test", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	call := func(id string) []model.Message {
		return []model.Message{
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: id, Name: "bash", Arguments: `{"command":"ls"}`}}},
			{Role: model.RoleTool, ToolCallID: id, ToolName: "bash", Content: "a.go b.go"},
		}
	}
	msgs := []model.Message{{Role: model.RoleSystem, Content: "You count files."}, {Role: model.RoleUser, Content: "count them"}}
	msgs = append(append(msgs, call("toolu_1")...), call("toolu_2")...)
	resp, err := m.Generate(t.Context(), model.Request{
		Messages: msgs,
		Tools:    []model.ToolSchema{{Name: "read_file"}, {Name: "bash"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tools[1]", "system[0]", "user[2].tool_result[0]", "user[4].tool_result[0]"}
	if !slices.Equal(where, want) {
		t.Errorf("breakpoints at %v, want %v", where, want)
	}
	for _, cc := range ccs {
		if cc != `{"type":"ephemeral"}` {
			t.Errorf("cache_control %s, want {\"type\":\"ephemeral\"}", cc)
		}
	}
	if u := (model.Usage{InputTokens: 12 + 340 + 4100, OutputTokens: 9, CacheReadTokens: 4100, CacheWriteTokens: 340}); resp.Usage != u {
		t.Errorf("usage = %+v, want %+v", resp.Usage, u)
	}
}

// A call under the runner's chat span is that one span (the SDK's own
// span, with the same token counts, would count them twice), and its
// request carries the span's trace context.
func TestOneSpanPerCall(t *testing.T) {
	var traceparent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent = r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tracing.StartChat(t.Context(), "anthropic", "claude-test")
	if _, err := m.Generate(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	tracing.EndChat(span, "", "claude-test", "stop", 3, 1, nil)
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 1 || names[0] != "chat claude-test" {
		t.Errorf("spans %v; want the chat span alone", names)
	}
	if want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"; traceparent != want {
		t.Errorf("traceparent %q, want %q", traceparent, want)
	}
}
