package durable_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// chatMessage and chatRequest are what the tests read of a Chat
// Completions request.
type chatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
}

// task is the first user message: the thread's task.
func (r *chatRequest) task() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			if s, ok := m.Content.(string); ok {
				return s
			}
		}
	}
	return ""
}

// turn counts the assistant messages so far: 0 on a thread's first call.
func (r *chatRequest) turn() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// toolCall is one tool call a scripted answer makes.
type toolCall struct {
	name string
	args map[string]string
}

// chatAnswer is a scripted answer: text, tool calls, or an HTTP error.
type chatAnswer struct {
	text   string
	calls  []toolCall
	status int // non-zero: answer with this error status
}

// Usage every answer reports.
const (
	promptTokens     = 10
	completionTokens = 2
)

// openAIServer speaks the Chat Completions wire format (the workers'
// openai provider points at it through OPENAI_BASE_URL), answering what
// script decides.
func openAIServer(t *testing.T, script func(*chatRequest) chatAnswer) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		ans := script(&req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if ans.status != 0 {
			w.Header().Set("Retry-After-Ms", "10")
			w.WriteHeader(ans.status)
			fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"rate_limit_error"}}`, ans.status)
			return
		}
		msg := map[string]any{"role": "assistant", "content": ans.text}
		finish := "stop"
		if len(ans.calls) > 0 {
			var tcs []map[string]any
			for i, c := range ans.calls {
				args, _ := json.Marshal(c.args)
				tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%d_%d", req.turn(), i), "type": "function",
					"function": map[string]any{"name": c.name, "arguments": string(args)}})
			}
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs}
			finish = "tool_calls"
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   map[string]any{"prompt_tokens": promptTokens, "completion_tokens": completionTokens, "total_tokens": promptTokens + completionTokens},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}
