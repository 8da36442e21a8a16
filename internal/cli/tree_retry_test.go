package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// A model call waiting to be retried shows on its thread's row while the
// wait lasts, in the live tree and as a log line, as a quota wait does;
// the row is running again once the call goes on.
func TestTreeShowsModelRetry(t *testing.T) {
	at := time.Now()
	root := event.Event{RunID: "r", ThreadID: "t0", Name: "formica", Time: at}
	helper := event.Event{RunID: "r", ThreadID: "t1", ParentID: "t0", Depth: 1, Name: "research", Time: at}
	with := func(e event.Event, typ event.Type, status event.Status, reason string) event.Event {
		e.Type, e.Status, e.Reason, e.Model = typ, status, reason, "openai:m"
		return e
	}
	retrying := with(helper, event.ModelWaiting, event.Waiting, "retrying: 429, 2s")
	goesOn := with(helper, event.ModelWaiting, event.Running, "")

	var out bytes.Buffer
	v := newTreeView(&out, true)
	v.color = false
	v.rec = record.NewRecorder(nil)
	emit := func(es ...event.Event) {
		for _, e := range es {
			v.rec.Emit(e)
			v.Emit(e)
		}
	}
	// frame is the rows of the last redraw.
	frame := func() []string {
		out.Reset()
		v.redraw()
		var rows []string
		for _, l := range strings.Split(out.String(), "\n") {
			if i := strings.LastIndex(l, "\x1b[2K"); i >= 0 {
				rows = append(rows, l[i+len("\x1b[2K"):])
			}
		}
		return rows
	}
	emit(with(root, event.RunStarted, "", ""), with(root, event.ThreadStarted, "", ""),
		with(helper, event.ThreadSpawned, "", ""), with(helper, event.ThreadStarted, "", ""), retrying)
	rows := frame()
	if len(rows) < 2 || !strings.HasPrefix(rows[1], "  · research  depth 1  retrying: 429, 2s  ") {
		t.Fatalf("while the retry waits, the rows are\n%s\nwant the helper's to show retrying: 429, 2s", strings.Join(rows, "\n"))
	}
	if !strings.HasPrefix(rows[0], "▸ formica  depth 0  running  ") {
		t.Errorf("root row %q", rows[0])
	}
	emit(goesOn)
	if rows := frame(); len(rows) < 2 || !strings.HasPrefix(rows[1], "  ▸ research  depth 1  running  ") {
		t.Errorf("once the retry goes out, the rows are\n%s\nwant the helper running", strings.Join(rows, "\n"))
	}
	// A retry after which the call ended shows no more either.
	emit(retrying, goesOn, with(helper, event.ModelCall, "", ""))
	if rows := frame(); len(rows) < 2 || !strings.HasPrefix(rows[1], "  ▸ research  depth 1  running  ") {
		t.Errorf("after the call, the rows are\n%s\nwant the helper running", strings.Join(rows, "\n"))
	}

	// Without a terminal: a line as the wait starts, none as it ends.
	out.Reset()
	lines := newTreeView(&out, false)
	lines.Emit(retrying)
	lines.Emit(goesOn)
	if got, want := out.String(), "  · research (depth 1) retrying: 429, 2s\n"; got != want {
		t.Errorf("log lines %q, want %q", got, want)
	}
}

// `formica run` shows a retried model call on stderr with no --log-level,
// through the whole embedded stack (runner, worker, coordinator, client):
// the provider answers 503 once, then 429 with Retry-After once. The 503
// waits the backoff; the 429 goes out again at once, for the endpoint's
// quota gate holds it back (a quota wait) as long as the provider asked.
func TestRunShowsModelRetryWithoutLogLevel(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`)
			return
		case 2:
			w.Header().Set("Retry-After", "0.05")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": "done"}}},
			"usage": map[string]any{"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
		})
	}))
	defer srv.Close()
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "test-key")

	var stdout, stderr bytes.Buffer
	code := Main([]string{"run", "--model", "openai:test-model", "--no-tty", "--cwd", t.TempDir(), "hello"},
		Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	if code != 0 || strings.TrimSpace(stdout.String()) != "done" {
		t.Fatalf("exit %d, stdout %q\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d model requests, want 3", n)
	}
	// The first retry's backoff is 250-500ms by default.
	for _, want := range []string{`(?m)^· formica \(depth 0\) retrying: 503, [2-5]\d\dms$`, `(?m)^· formica \(depth 0\) retrying: 429$`} {
		if !regexp.MustCompile(want).MatchString(stderr.String()) {
			t.Errorf("stderr does not show the retry (%s):\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "refused message") || strings.Contains(stderr.String(), "level=") {
		t.Errorf("stderr has log lines:\n%s", stderr.String())
	}
}
