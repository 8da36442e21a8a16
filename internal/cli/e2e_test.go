package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/limits"
)

// formicaBin is the formica binary built once for every end-to-end test.
var formicaBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "formica-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	formicaBin = filepath.Join(dir, "formica")
	build := exec.Command("go", "build", "-o", formicaBin, "../../cmd/formica")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build formica:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// chatRequest is the part of an OpenAI Chat Completions request the fake
// server reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func (r *chatRequest) task() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return contentText(m.Content)
		}
	}
	return ""
}

// results are the tool results after the last assistant message.
func (r *chatRequest) results() []string {
	var out []string
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role == "tool"; i-- {
		out = append([]string{contentText(r.Messages[i].Content)}, out...)
	}
	return out
}

func (r *chatRequest) assistantTurns() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

func contentText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any: // content parts
		var b strings.Builder
		for _, p := range v {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

type reply struct {
	text  string
	calls [][2]string // name, task of agent calls
}

// openAIServer answers Chat Completions requests in the real wire format with
// what script decides.
func openAIServer(t *testing.T, script func(*chatRequest) reply) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer test-key" {
			w.WriteHeader(401)
			w.Write([]byte(`{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}`))
			return
		}
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		rep := script(&req)
		msg := map[string]any{"role": "assistant", "content": rep.text}
		finish := "stop"
		if len(rep.calls) > 0 {
			var tcs []map[string]any
			for i, c := range rep.calls {
				args, _ := json.Marshal(map[string]string{"name": c[0], "task": c[1]})
				tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]any{"name": "agent", "arguments": string(args)}})
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
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runRecord is the --json output.
type runRecord struct {
	RunID   string `json:"run_id"`
	Status  string `json:"status"`
	Output  string `json:"output"`
	Error   string `json:"error"`
	Threads []struct {
		ID       string `json:"id"`
		ParentID string `json:"parent_id"`
		Name     string `json:"name"`
		Depth    int    `json:"depth"`
		Status   string `json:"status"`
	} `json:"threads"`
	Refusals struct {
		Depth   int `json:"depth"`
		Threads int `json:"threads"`
	} `json:"refusals"`
	Usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

type result struct {
	code           int
	stdout, stderr string
}

func formica(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, formicaBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run formica: %v", err)
	}
	return result{code, out.String(), errb.String()}
}

func openAIEnv(srv *httptest.Server) []string {
	return []string{"OPENAI_BASE_URL=" + srv.URL + "/v1", "OPENAI_API_KEY=test-key"}
}

func decodeRecord(t *testing.T, r result) runRecord {
	t.Helper()
	var rec runRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("stdout is not the run record: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rec
}

func TestRunDepthChainOverOpenAIWire(t *testing.T) {
	srv := openAIServer(t, func(req *chatRequest) reply {
		var n int
		fmt.Sscanf(req.task(), "chain-%d", &n)
		if res := req.results(); len(res) > 0 {
			return reply{text: fmt.Sprintf("%d>%s", n, res[0])}
		}
		return reply{calls: [][2]string{{fmt.Sprintf("c%d", n+1), fmt.Sprintf("chain-%d", n+1)}}}
	})
	r := formica(t, openAIEnv(srv), "run", "--model", "openai:test-model", "--json", "--cwd", t.TempDir(), "chain-0")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rec := decodeRecord(t, r)
	if want := "0>1>2>3>4>" + limits.DepthMessage; rec.Status != "succeeded" || rec.Output != want {
		t.Fatalf("status %s output %q, want %q", rec.Status, rec.Output, want)
	}
	if len(rec.Threads) != 5 || rec.Refusals.Depth != 1 || rec.Refusals.Threads != 0 {
		t.Fatalf("threads %d refusals %+v", len(rec.Threads), rec.Refusals)
	}
	for i, th := range rec.Threads {
		if th.Depth != i || th.Status != "succeeded" || (i > 0 && th.ParentID != rec.Threads[i-1].ID) {
			t.Errorf("thread %d: %+v", i, th)
		}
	}
	if rec.Threads[0].ParentID != "" || rec.RunID == "" {
		t.Errorf("root %+v run %q", rec.Threads[0], rec.RunID)
	}
	// 5 threads × 2 model calls × (12 in, 3 out).
	if rec.Usage.InputTokens != 120 || rec.Usage.OutputTokens != 30 {
		t.Errorf("usage %+v", rec.Usage)
	}
}

func TestRunWideFanOutAgainstThreadLimit(t *testing.T) {
	var mu sync.Mutex
	inFlight := 0
	released := make(chan struct{})
	srv := openAIServer(t, func(req *chatRequest) reply {
		task := req.task()
		if strings.HasPrefix(task, "leaf-") {
			// Hold every leaf until the 16 admitted helpers are all alive.
			mu.Lock()
			inFlight++
			if inFlight == limits.DefaultMaxThreads {
				close(released)
			}
			mu.Unlock()
			select {
			case <-released:
			case <-time.After(20 * time.Second):
			}
			return reply{text: "ok " + task}
		}
		if res := req.results(); len(res) > 0 {
			return reply{text: strings.Join(res, "\n")}
		}
		var calls [][2]string
		for i := range 20 {
			calls = append(calls, [2]string{fmt.Sprintf("leaf%d", i), fmt.Sprintf("leaf-%d", i)})
		}
		return reply{calls: calls}
	})
	r := formica(t, openAIEnv(srv), "run", "--model", "openai:test-model", "--json", "--agent-max-threads", "16", "--cwd", t.TempDir(), "fan out")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rec := decodeRecord(t, r)
	lines := strings.Split(rec.Output, "\n")
	ok, refused := 0, 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "ok leaf-"):
			ok++
		case l == limits.ThreadMessage:
			refused++
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	if ok != 16 || refused != 4 || rec.Refusals.Threads != 4 || len(rec.Threads) != 17 {
		t.Fatalf("ok %d refused %d record refusals %+v threads %d", ok, refused, rec.Refusals, len(rec.Threads))
	}
}

func TestRunOutputSchemaOverOpenAIWire(t *testing.T) {
	specFile := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(specFile, []byte(`name: counter
instructions: Count things.
output_schema:
  type: object
  required: [count]
  properties:
    count: {type: integer}
`), 0o644)
	srv := openAIServer(t, func(req *chatRequest) reply {
		if req.assistantTurns() == 0 {
			return reply{text: "I think there are three."}
		}
		return reply{text: `{"count": 3}`}
	})
	r := formica(t, openAIEnv(srv), "run", "--agent", specFile, "--model", "openai:test-model", "--cwd", t.TempDir(), "count the files")
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"count": 3}` {
		t.Fatalf("exit %d stdout %q\n%s", r.code, r.stdout, r.stderr)
	}

	always := openAIServer(t, func(*chatRequest) reply { return reply{text: "no json"} })
	r = formica(t, openAIEnv(always), "run", "--agent", specFile, "--model", "openai:test-model", "--json", "--cwd", t.TempDir(), "count")
	rec := decodeRecord(t, r)
	if r.code != 1 || rec.Status != "failed" || !strings.Contains(rec.Error, "output did not match schema") {
		t.Fatalf("exit %d record %+v", r.code, rec)
	}
}

func TestRunExitCodes(t *testing.T) {
	srv := openAIServer(t, func(*chatRequest) reply { return reply{text: "hi"} })
	bad := formica(t, []string{"OPENAI_BASE_URL=" + srv.URL + "/v1", "OPENAI_API_KEY=wrong"}, "run", "--model", "openai:m", "--cwd", t.TempDir(), "hello")
	if bad.code != 1 || !strings.Contains(bad.stderr, "failed") {
		t.Errorf("401: exit %d stderr %q", bad.code, bad.stderr)
	}
	if r := formica(t, nil, "run"); r.code != 2 {
		t.Errorf("no task: exit %d", r.code)
	}
	if r := formica(t, nil, "run", "--approve", "maybe", "x"); r.code != 2 {
		t.Errorf("bad --approve: exit %d", r.code)
	}
	if r := formica(t, nil, "frobnicate"); r.code != 2 {
		t.Errorf("unknown command: exit %d", r.code)
	}
}

func TestRunSimDefaultShowsHelperTree(t *testing.T) {
	r := formica(t, nil, "run", "--cwd", t.TempDir(), "Plan a trip:\n- book flights\n- find a hotel\n- rent a car")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "no model configured") {
		t.Errorf("no sim notice in stderr:\n%s", r.stderr)
	}
	for _, want := range []string{"book-flights", "find-a-hotel", "rent-a-car"} {
		if !strings.Contains(r.stderr, want) || !strings.Contains(r.stdout, want) {
			t.Errorf("helper %s missing from tree or output\nstderr:\n%s\nstdout:\n%s", want, r.stderr, r.stdout)
		}
	}
}

// The root model comes from --model, else the spec's model, else
// $FORMICA_MODEL: the environment variable, although it binds --model, stays
// below the spec.
func TestRunModelPrecedenceWithEnvironment(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := openAIServer(t, func(req *chatRequest) reply {
		mu.Lock()
		asked = append(asked, req.Model)
		mu.Unlock()
		return reply{text: "done"}
	})
	specFile := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(specFile, []byte("name: pinned\nmodel: openai:spec-model\ninstructions: Answer.\n"), 0o644)
	env := append(openAIEnv(srv), "FORMICA_MODEL=openai:env-model")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent", specFile}, "spec-model"},
		{nil, "env-model"},
		{[]string{"--agent", specFile, "--model", "openai:flag-model"}, "flag-model"},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		args := append(append([]string{"run"}, c.args...), "--cwd", t.TempDir(), "hello")
		if r := formica(t, env, args...); r.code != 0 {
			t.Fatalf("formica %v: exit %d\n%s", args, r.code, r.stderr)
		}
		mu.Lock()
		got := asked
		mu.Unlock()
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("formica %v with $FORMICA_MODEL: models asked %v, want %s", args, got, c.want)
		}
	}
}
