package durable_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/test/proc"
)

// chatServer is an OpenAI-compatible Chat Completions server that answers
// by script and keeps every request, by thread: a thread is known by its
// task (its first user message), which each test makes unique.
type chatServer struct {
	t      *testing.T
	srv    *httptest.Server
	script func(task string, req jRequest) jAnswer

	mu   sync.Mutex
	reqs map[string][]jRequest
}

type jRequest struct {
	Model    string     `json:"model"`
	Messages []jMessage `json:"messages"`
}

type jMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []jToolCall     `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type jToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// jAnswer is what the script says: text, tool calls, or a failure; wait,
// when set, holds the answer until it is closed or the caller goes away.
type jAnswer struct {
	text   string
	calls  []call
	status int
	wait   <-chan struct{}
}

type call struct{ name, args string }

func agentCall(name, task string) call {
	b, _ := json.Marshal(map[string]string{"name": name, "task": task})
	return call{"agent", string(b)}
}

func bashCall(command string) call {
	b, _ := json.Marshal(map[string]string{"command": command})
	return call{"bash", string(b)}
}

func newChatServer(t *testing.T, script func(task string, req jRequest) jAnswer) *chatServer {
	t.Helper()
	s := &chatServer{t: t, script: script, reqs: map[string][]jRequest{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// env is what a worker needs to call this server.
func (s *chatServer) env() []string {
	return []string{"OPENAI_BASE_URL=" + s.srv.URL + "/v1", "OPENAI_API_KEY=test-key"}
}

func (s *chatServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer test-key" {
		http.Error(w, "no", http.StatusNotFound)
		return
	}
	var req jRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	task := req.task()
	s.mu.Lock()
	s.reqs[task] = append(s.reqs[task], req)
	s.mu.Unlock()
	a := s.script(task, req)
	if a.wait != nil {
		select {
		case <-a.wait:
		case <-r.Context().Done():
			return
		}
	}
	if a.status != 0 {
		w.Header().Set("Retry-After-Ms", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write([]byte(`{"error":{"message":"the test's server fails this thread","type":"server_error"}}`))
		return
	}
	msg := map[string]any{"role": "assistant", "content": a.text}
	finish := "stop"
	if len(a.calls) > 0 {
		var tcs []map[string]any
		for i, c := range a.calls {
			tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs}
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
	})
}

func (r jRequest) task() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.text()
		}
	}
	return ""
}

// turn is how many model responses the thread had before this request.
func (r jRequest) turn() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// toolResults joins the contents of the tool messages.
func (r jRequest) toolResults() string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, m.text())
		}
	}
	return strings.Join(out, "|")
}

func (m jMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// messages is the request's conversation as model messages.
func (r jRequest) messages() []model.Message {
	out := make([]model.Message, 0, len(r.Messages))
	for _, m := range r.Messages {
		mm := model.Message{Role: model.Role(m.Role), Content: m.text(), ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			mm.ToolCalls = append(mm.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		out = append(out, mm)
	}
	return out
}

// count is how many requests the thread with task sent for turn (-1: all).
func (s *chatServer) count(task string, turn int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs[task] {
		if turn < 0 || r.turn() == turn {
			n++
		}
	}
	return n
}

// last is the thread's last request.
func (s *chatServer) last(task string) jRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.reqs[task]
	if len(rs) == 0 {
		s.t.Fatalf("the model server never heard from the thread with task %q", task)
	}
	return rs[len(rs)-1]
}

// waitCount waits until the thread with task sent n requests for turn.
func (s *chatServer) waitCount(task string, turn, n int) {
	s.t.Helper()
	proc.WaitUntil(s.t, runTimeout, fmt.Sprintf("%q sent %d requests for turn %d", task, n, turn), func() bool {
		return s.count(task, turn) >= n
	})
}

// chatAgent is an agent spec for the API: the test's server as its model,
// the agent tool, and every base tool allowed.
func chatAgent() map[string]any {
	return map[string]any{"name": "formica", "model": "openai:test-model", "tools": []string{"agent"},
		"harness": map[string]any{"permissions": map[string]any{"default": "allow"}}}
}

// startChatWorker starts a worker that calls s, with its own credentials.
func (c *coord) startChatWorker(id string, slots int, s *chatServer) *proc.Proc {
	c.t.Helper()
	return c.startChatWorkerWith(id, slots, s, "--nats-creds", c.creds("worker", id))
}

// startChatWorkerWith starts a worker that calls s, with extra flags.
func (c *coord) startChatWorkerWith(id string, slots int, s *chatServer, extra ...string) *proc.Proc {
	c.t.Helper()
	return c.startChatWorkerEnv(id, slots, s, nil, extra...)
}

// startChatWorkerEnv is startChatWorkerWith with environment variables.
func (c *coord) startChatWorkerEnv(id string, slots int, s *chatServer, env []string, extra ...string) *proc.Proc {
	c.t.Helper()
	args := append([]string{"--nats", c.url, "--id", id, "--slots", fmt.Sprint(slots), "--heartbeat", heartbeat, "--allow-scripted"}, extra...)
	p := proc.StartWith(c.t, proc.Options{Env: append(s.env(), env...)}, "worker "+id, bin.worker, args...)
	p.WaitLog(c.t, "worker ready", readyTimeout)
	proc.WaitUntil(c.t, readyTimeout, "the coordinator lists worker "+id, func() bool {
		var ws []struct{ ID string }
		c.getJSON("/v1/workers", &ws)
		for _, w := range ws {
			if w.ID == id {
				return true
			}
		}
		return false
	})
	return p
}
