package mcp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// chatRequest is the part of a Chat Completions request the script reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// task is the thread's task: its first user message.
func (r *chatRequest) task() string {
	for _, m := range r.Messages {
		if s, ok := m.Content.(string); ok && m.Role == "user" {
			return s
		}
	}
	return ""
}

// turn counts the thread's model answers so far.
func (r *chatRequest) turn() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// lastTool is the last tool result the thread got.
func (r *chatRequest) lastTool() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "tool" {
			s, _ := m.Content.(string)
			return s
		}
	}
	return ""
}

// allTools joins the results of the thread's last turn of tool calls.
func (r *chatRequest) allTools() string {
	var out []string
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role == "tool"; i-- {
		s, _ := r.Messages[i].Content.(string)
		out = append([]string{s}, out...)
	}
	return strings.Join(out, "\n")
}

// toolNames is the tools the request offers, in order.
func (r *chatRequest) toolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

type call struct {
	name string
	args any
}

// answer is text or tool calls.
type answer struct {
	text  string
	calls []call
}

// modelServer speaks the Chat Completions wire format at /v1, answering
// what script decides; every request is kept for the test to inspect.
type modelServer struct {
	URL  string
	mu   sync.Mutex
	reqs []*chatRequest
}

func startModel(t *testing.T, script func(*chatRequest) answer) *modelServer {
	t.Helper()
	ms := &modelServer{}
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
		ms.mu.Lock()
		ms.reqs = append(ms.reqs, &req)
		ms.mu.Unlock()
		ans := script(&req)
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
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
		})
	}))
	t.Cleanup(srv.Close)
	ms.URL = srv.URL + "/v1"
	t.Setenv("OPENAI_BASE_URL", ms.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	return ms
}

// requests returns the kept requests of the thread with the given task.
func (ms *modelServer) requests(task string) []*chatRequest {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var out []*chatRequest
	for _, r := range ms.reqs {
		if r.task() == task {
			out = append(out, r)
		}
	}
	return out
}

// tree is the scripted tree root -> mid -> leaf: root and mid each spawn
// one helper and answer with its reply; leaf runs leafTurn.
func tree(leafTurn func(*chatRequest) answer) func(*chatRequest) answer {
	return func(r *chatRequest) answer {
		switch task := r.task(); {
		case task == "leaf":
			return leafTurn(r)
		case r.turn() > 0:
			return answer{text: r.lastTool()}
		case task == "root":
			return answer{calls: []call{{"agent", map[string]string{"name": "mid", "task": "mid"}}}}
		case task == "mid":
			return answer{calls: []call{{"agent", map[string]string{"name": "leaf", "task": "leaf"}}}}
		}
		return answer{text: "unexpected task " + strings.TrimSpace(r.task())}
	}
}
