package browser_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeOpenAI is a local server speaking the Chat Completions wire format,
// for workers started with OPENAI_BASE_URL pointing at it. Its model
// writes a file named after its task ("write:NAME" → write_file
// {"path": "NAME.txt", ...}) and, once the call has a result, answers
// "result: <the tool result>", so a test sees what the tool said.
func fakeOpenAI(t *testing.T) (baseURL string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var task, result string
		hasResult := false
		for _, m := range req.Messages {
			switch m.Role {
			case "user":
				task = text(m.Content)
			case "tool":
				result, hasResult = text(m.Content), true
			}
		}
		msg := map[string]any{"role": "assistant"}
		finish := "stop"
		name, ok := strings.CutPrefix(strings.TrimSpace(task), "write:")
		switch {
		case ok && !hasResult:
			args, _ := json.Marshal(map[string]string{"path": name + ".txt", "content": "written for " + name})
			msg["content"] = nil
			msg["tool_calls"] = []map[string]any{{"id": "call_" + name, "type": "function",
				"function": map[string]any{"name": "write_file", "arguments": string(args)}}}
			finish = "tool_calls"
		case hasResult:
			msg["content"] = "result: " + result
		default:
			msg["content"] = "done: " + task
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// text is a message's content: a string or a list of text parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprint(&b, p.Text)
	}
	return b.String()
}
