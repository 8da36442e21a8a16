package durable_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/wire"
	"github.com/formica-run/formica/test/proc"
)

// appendModel is a Chat Completions server whose model, for the task
// "append", calls bash once to append a line to lines.txt and then answers
// "appended". Its very first bash call is held until release is closed;
// held is closed when that request arrives.
func appendModel(t *testing.T) (baseURL string, held, release chan struct{}) {
	t.Helper()
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answered := false
		for _, m := range req.Messages {
			answered = answered || m.Role == "tool"
		}
		msg := map[string]any{"role": "assistant", "content": "appended"}
		finish := "stop"
		if !answered {
			first := false
			once.Do(func() { first = true })
			if first {
				close(held)
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "bash", "arguments": `{"command":"echo line >> lines.txt"}`}}}}
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", held, release
}

// TestFrozenWorkerHasNoEffect: the worker hosting a helper is frozen
// (SIGSTOP) before the helper's bash call, for longer than the loss window.
// The coordinator places the helper again elsewhere, where it appends its
// line; when the frozen worker is continued (SIGCONT) with the bash call in
// its socket, its superseded placement runs nothing: the worker saw its
// process stand still, so the call waits for the coordinator to confirm the
// placement, which it refuses (or a heartbeat naming the placement, or the
// lapsed lease, stops the thread first). The file has exactly one line, and
// every process is up.
func TestFrozenWorkerHasNoEffect(t *testing.T) {
	t.Parallel()
	base, held, release := appendModel(t)
	c := startCoord(t, coordOpts{})
	workers := map[string]*proc.Proc{}
	for _, id := range []string{"w1", "w2"} {
		workers[id] = c.startWorkerWith(id, 2, []string{"OPENAI_BASE_URL=" + base, "OPENAI_API_KEY=test"}, "--sandbox", "off")
	}

	nc := c.connect()
	defer nc.Close()
	started := make(chan string, 8)
	sub, err := nc.Subscribe(wire.SubjectEvents("*")+".thread.started", func(m *nats.Msg) {
		if e, err := event.Unmarshal(m.Data); err == nil && e.Depth == 1 {
			started <- e.Worker
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	nc.Flush()

	agent := simAgent(0)
	agent["helper"] = map[string]any{"model": "openai:fake", "tools": map[string]any{"policy": "override", "add": []string{"bash"}}}
	agent["harness"] = map[string]any{"permissions": map[string]any{"default": "allow"}}
	run := c.submit(map[string]any{"task": "Do:\n- append", "agent": agent})

	var frozen string
	select {
	case frozen = <-started:
	case <-time.After(runTimeout):
		t.Fatal("the helper did not start")
	}
	select {
	case <-held:
	case <-time.After(runTimeout):
		t.Fatal("the helper's model call did not come")
	}
	fp := workers[frozen]
	if err := fp.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// SIGSTOP stops a process once the kernel has stopped each of its
	// threads, which on a loaded machine may take a while; until then the
	// worker may read the answer and start the call before it stands still.
	proc.WaitUntil(t, readyTimeout, "worker "+frozen+" is stopped", func() bool { return stopped(t, fp.Cmd.Process.Pid) })
	close(release) // the bash call waits in the frozen worker's socket

	rec := c.waitFinal(run)
	if err := fp.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if rec.Status != event.Succeeded || rec.Output != "append: appended" {
		t.Errorf("run: %s (%s), output %q", rec.Status, rec.Error, rec.Output)
	}
	// The continued worker stops its superseded placement: its silence
	// watchdog or a heartbeat naming the placement comes first, or the
	// lease refuses the call.
	proc.WaitUntil(t, readyTimeout, "worker "+frozen+" stops its superseded placement", func() bool {
		log := fp.Stderr.String()
		return strings.Contains(log, "tool call refused") || strings.Contains(log, "placement superseded") ||
			strings.Contains(log, "placement lapsed")
	})
	data, err := os.ReadFile(filepath.Join(c.cwd, "lines.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(data), "line\n"); got != 1 || len(data) != len("line\n") {
		t.Errorf("lines.txt is %q, want exactly one line", data)
	}
	for id, p := range workers {
		if p.Exited() {
			t.Errorf("worker %s: %s", id, p.Status())
		}
	}
	if c.p.Exited() {
		t.Errorf("coordinator: %s", c.p.Status())
	}
}

// stopped says whether every thread of process pid is stopped (state T in
// /proc/PID/task/TID/stat).
func stopped(t *testing.T, pid int) bool {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false // a thread that just ended; look again
		}
		// The state follows the command name, which is in parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return len(tasks) > 0
}
