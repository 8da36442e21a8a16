package openai_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/openai"
)

// sse serves chunks as a Chat Completions stream ending in [DONE].
func sse(t *testing.T, chunks ...string) *openai.Model {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range append(chunks, "[DONE]") {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
	}))
	t.Cleanup(srv.Close)
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "local", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Some servers (vLLM with continuous usage stats) send running totals in
// every chunk: the usage is the last, not their sum.
func TestStreamRunningUsage(t *testing.T) {
	m := sse(t,
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`,
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
	)
	resp, err := m.Generate(t.Context(), hi)
	if err != nil {
		t.Fatal(err)
	}
	want := model.Response{Text: "ab", StopReason: "stop", ID: "c", Usage: model.Usage{InputTokens: 9, OutputTokens: 3}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// A streamed refusal is the answer, as a non-streamed one is.
func TestStreamRefusal(t *testing.T) {
	m := sse(t,
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":"I can't "}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"refusal":"help with that."}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	)
	resp, err := m.Generate(t.Context(), hi)
	if err != nil || resp.Text != "I can't help with that." {
		t.Errorf("Generate = %q, %v; want the refusal", resp.Text, err)
	}
}

var hi = model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}

// A thread's calls carry its cache key as prompt_cache_key, and the
// cached part of the prompt comes back in the usage.
func TestPromptCache(t *testing.T) {
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("decoding the request: %v", err)
		}
		got = append(got, body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}],"usage":null}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
			`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,` +
				`"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
	}))
	defer srv.Close()
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "local", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{
		Messages: []model.Message{{Role: model.RoleSystem, Content: "be brief"}, {Role: model.RoleUser, Content: "hi"}},
		Tools:    []model.ToolSchema{{Name: "b"}, {Name: "a"}},
		CacheKey: "run1-root",
	}
	resp, err := m.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.Usage{InputTokens: 2006, OutputTokens: 300, CacheReadTokens: 1920}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if _, err := m.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(got))
	}
	for i, body := range got {
		if body["prompt_cache_key"] != "run1-root" {
			t.Errorf("request %d: prompt_cache_key = %v, want run1-root", i, body["prompt_cache_key"])
		}
	}
	// Everything before the conversation goes in the same order each time.
	first, _ := json.Marshal([]any{got[0]["tools"], got[0]["messages"]})
	second, _ := json.Marshal([]any{got[1]["tools"], got[1]["messages"]})
	if string(first) != string(second) {
		t.Errorf("the prefix changed between two identical calls:\n%s\n%s", first, second)
	}
	if _, err := m.Generate(t.Context(), model.Request{Messages: req.Messages}); err != nil {
		t.Fatal(err)
	}
	if k, ok := got[2]["prompt_cache_key"]; ok {
		t.Errorf("prompt_cache_key %v sent without a CacheKey", k)
	}
}
