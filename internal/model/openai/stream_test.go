package openai_test

import (
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
	want := model.Response{Text: "ab", StopReason: "stop", Usage: model.Usage{InputTokens: 9, OutputTokens: 3}}
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
