package durable_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// transcript reads a thread's transcript through the API; ok is false
// while it has none.
func (c *coord) transcript(run, thread string) (api.Transcript, bool) {
	var t api.Transcript
	return t, c.getJSON("/v1/runs/"+run+"/threads/"+thread, &t) == http.StatusOK
}

// threadNamed returns the thread of run called name.
func (c *coord) threadNamed(run, name string) api.ThreadSummary {
	c.t.Helper()
	var found api.ThreadSummary
	proc.WaitUntil(c.t, runTimeout, "run "+run+" lists thread "+name, func() bool {
		var ts []api.ThreadSummary
		c.getJSON("/v1/runs/"+run+"/threads", &ts)
		for _, t := range ts {
			if t.Name == name {
				found = t
				return true
			}
		}
		return false
	})
	return found
}

// toolResults counts the journaled tool results of a thread with status ok.
func toolResults(t api.Transcript) int {
	n := 0
	for _, e := range t.Entries {
		if e.Kind == journal.KindTool && e.ToolStatus == journal.ToolOK {
			n++
		}
	}
	return n
}

// sameConversation checks that a thread's transcript is what the model
// server received, message for message, and then the final answer.
func sameConversation(t *testing.T, what string, tr api.Transcript, last jRequest, final string) {
	t.Helper()
	want := append(last.messages(), model.Message{Role: model.RoleAssistant, Content: final})
	got := make([]model.Message, len(tr.Messages))
	for i, m := range tr.Messages {
		m.ToolName = "" // not on the OpenAI wire
		got[i] = m
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: transcript against what the model server received (-server +transcript):\n%s", what, diff)
		for _, e := range tr.Entries {
			t.Logf("  entry %d %s turn %d call %s %s %q", e.Seq, e.Kind, e.Turn, e.CallID, e.ToolStatus, e.Result)
		}
	}
}

// TestJournalCoordinatorKilledMidFanOut: a root fans out to four helpers;
// each appends a line to a file through bash, then makes one more model
// call, slow for two of them. The coordinator is killed once two helpers
// have finished and two are in their slow call, and restarted: the run
// succeeds on its second attempt, the file has each line once, the
// finished helpers' model calls and the root's first call were made once,
// and the transcripts are what the model server received.
func TestJournalCoordinatorKilledMidFanOut(t *testing.T) {
	t.Parallel()
	const rootTask = "fan out to four"
	slow := map[string]bool{"c": true, "d": true}
	var srv *chatServer
	srv = newChatServer(t, func(task string, req jRequest) jAnswer {
		if task == rootTask {
			if req.turn() == 0 {
				var calls []call
				for _, n := range []string{"a", "b", "c", "d"} {
					calls = append(calls, agentCall(n, "helper "+n))
				}
				return jAnswer{calls: calls}
			}
			return jAnswer{text: "all: " + req.toolResults()}
		}
		name := strings.TrimPrefix(task, "helper ")
		if req.turn() == 0 {
			return jAnswer{calls: []call{bashCall("echo " + name + " >> lines.txt")}}
		}
		if slow[name] && srv.count(task, 1) == 1 {
			return jAnswer{text: "too late", wait: make(chan struct{})} // until its caller goes
		}
		return jAnswer{text: "done " + name}
	})
	c := startCoord(t, coordOpts{})
	c.startChatWorker("w1", 8, srv)
	c.startChatWorker("w2", 8, srv)

	id := c.submit(map[string]any{"task": rootTask, "agent": chatAgent()})
	root := journal.RootID(id)
	srv.waitCount("helper c", 1, 1)
	srv.waitCount("helper d", 1, 1)
	proc.WaitUntil(t, runTimeout, "the root journaled two helpers' results", func() bool {
		tr, ok := c.transcript(id, root)
		return ok && toolResults(tr) == 2
	})
	c.kill9()
	c.restart()

	rec := c.waitFinal(id)
	if rec.Status != event.Succeeded || rec.Attempts != 2 {
		t.Fatalf("run %s: %s (%s), %d attempts; want succeeded on attempt 2", id, rec.Status, rec.Error, rec.Attempts)
	}
	data, err := os.ReadFile(filepath.Join(c.cwd, "lines.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(data))
	slices.Sort(lines)
	if !slices.Equal(lines, []string{"a", "b", "c", "d"}) {
		t.Errorf("lines.txt holds %q; want each helper's line once", lines)
	}
	for _, n := range []string{"a", "b"} {
		if got := srv.count("helper "+n, -1); got != 2 {
			t.Errorf("helper %s made %d model calls, want 2 (it had finished: none again)", n, got)
		}
	}
	for _, n := range []string{"c", "d"} {
		if got := srv.count("helper "+n, 0); got != 1 {
			t.Errorf("helper %s made its first model call %d times, want 1", n, got)
		}
	}
	if got := srv.count(rootTask, 0); got != 1 {
		t.Errorf("the root made its first model call %d times, want 1", got)
	}
	if !strings.Contains(rec.Output, "done a") || !strings.Contains(rec.Output, "done d") {
		t.Errorf("output %q", rec.Output)
	}
	reused := 0
	for _, th := range rec.Threads {
		if th.Reused {
			reused++
		}
	}
	if reused != 2 {
		t.Errorf("%d threads marked reused in the record, want 2 (a and b)", reused)
	}

	// The transcripts are the conversations the model server saw.
	tr, _ := c.transcript(id, root)
	sameConversation(t, "root", tr, srv.last(rootTask), rec.Output)
	// The root journaled each spawn with the helper's id.
	spawned := map[string]string{}
	for _, e := range tr.Entries {
		if e.Kind == journal.KindSpawn {
			spawned[e.Name] = e.Child
		}
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if want := c.threadNamed(id, n).ID; spawned[n] != want {
			t.Errorf("the root's journal has helper %s spawned as %q, want %s", n, spawned[n], want)
		}
	}
	a := c.threadNamed(id, "a")
	if a.Path != "formica/a" || a.Status != event.Succeeded {
		t.Errorf("thread a listed as %+v", a)
	}
	tra, _ := c.transcript(id, a.ID)
	sameConversation(t, "helper a", tra, srv.last("helper a"), "done a")
	trd, _ := c.transcript(id, c.threadNamed(id, "d").ID)
	sameConversation(t, "helper d", trd, srv.last("helper d"), "done d")
}

// TestJournalRootWorkerLost: the worker hosting the root is killed while
// its two helpers run on other workers. The root is placed again and
// resumes from its journal; the helpers are not cancelled (each makes its
// one model call once) and deliver their results to it.
func TestJournalRootWorkerLost(t *testing.T) {
	t.Parallel()
	const rootTask = "two helpers, root on its own worker"
	rootGate, helpersGate := make(chan struct{}), make(chan struct{})
	srv := newChatServer(t, func(task string, req jRequest) jAnswer {
		switch {
		case task == rootTask && req.turn() == 0:
			return jAnswer{calls: []call{agentCall("x", "helper x"), agentCall("y", "helper y")}, wait: rootGate}
		case task == rootTask:
			return jAnswer{text: "root: " + req.toolResults()}
		}
		return jAnswer{text: "done " + task, wait: helpersGate}
	})
	c := startCoord(t, coordOpts{})
	wz := c.startChatWorker("wz", 2, srv)
	id := c.submit(map[string]any{"task": rootTask, "agent": chatAgent()})
	srv.waitCount(rootTask, 0, 1)
	// The root holds wz; the helpers go where fewer threads are hosted.
	c.startChatWorker("wa", 4, srv)
	c.startChatWorker("wb", 4, srv)
	close(rootGate)
	srv.waitCount("helper x", 0, 1)
	srv.waitCount("helper y", 0, 1)
	for _, n := range []string{"x", "y"} {
		if w := c.threadNamed(id, n).Worker; w == "wz" || w == "" {
			t.Fatalf("helper %s is on %q; the test needs it beside the root's worker, not on it", n, w)
		}
	}
	root := journal.RootID(id)
	wz.Kill(t)
	proc.WaitUntil(t, runTimeout, "the root is placed again", func() bool {
		tr, ok := c.transcript(id, root)
		return ok && tr.Attempts >= 2
	})
	close(helpersGate)

	rec := c.waitFinal(id)
	if rec.Status != event.Succeeded || rec.Output != "root: done helper x|done helper y" {
		t.Fatalf("run %s: %s (%s), output %q", id, rec.Status, rec.Error, rec.Output)
	}
	for _, n := range []string{"x", "y"} {
		if got := srv.count("helper "+n, -1); got != 1 {
			t.Errorf("helper %s made %d model calls, want 1: it was not cancelled nor run again", n, got)
		}
		th := c.threadNamed(id, n)
		if th.Status != event.Succeeded || th.Attempts != 1 {
			t.Errorf("helper %s: %s after %d placements, want succeeded after 1", n, th.Status, th.Attempts)
		}
	}
	if got := srv.count(rootTask, 0); got != 1 {
		t.Errorf("the root made its first model call %d times, want 1", got)
	}
}

// TestJournalHelperWorkerLost: the worker hosting a helper is killed after
// the helper's first tool call; the helper is placed again, reuses its
// first model response and its bash result, and the run succeeds.
func TestJournalHelperWorkerLost(t *testing.T) {
	t.Parallel()
	const rootTask = "one helper that loses its worker"
	var srv *chatServer
	srv = newChatServer(t, func(task string, req jRequest) jAnswer {
		switch {
		case task == rootTask && req.turn() == 0:
			return jAnswer{calls: []call{agentCall("h", "helper h")}}
		case task == rootTask:
			return jAnswer{text: "root: " + req.toolResults()}
		case req.turn() == 0:
			return jAnswer{calls: []call{bashCall("echo h >> lines.txt")}}
		case srv.count(task, 1) == 1:
			return jAnswer{text: "too late", wait: make(chan struct{})} // its worker dies meanwhile
		}
		return jAnswer{text: "done h"}
	})
	c := startCoord(t, coordOpts{})
	workers := map[string]*proc.Proc{"w1": c.startChatWorker("w1", 4, srv), "w2": c.startChatWorker("w2", 4, srv)}
	id := c.submit(map[string]any{"task": rootTask, "agent": chatAgent()})
	srv.waitCount("helper h", 1, 1)
	h := c.threadNamed(id, "h")
	tr, _ := c.transcript(id, h.ID)
	if toolResults(tr) != 1 {
		t.Fatalf("helper h in its second model call without its bash result journaled: %+v", tr.Entries)
	}
	workers[h.Worker].Kill(t)

	rec := c.waitFinal(id)
	if rec.Status != event.Succeeded || rec.Output != "root: done h" {
		t.Fatalf("run %s: %s (%s), output %q", id, rec.Status, rec.Error, rec.Output)
	}
	if got := srv.count("helper h", 0); got != 1 {
		t.Errorf("helper h made its first model call %d times, want 1", got)
	}
	if data, _ := os.ReadFile(filepath.Join(c.cwd, "lines.txt")); string(data) != "h\n" {
		t.Errorf("lines.txt holds %q, want the helper's line once", data)
	}
	if th := c.threadNamed(id, "h"); th.Attempts < 2 {
		t.Errorf("helper h placed %d times, want 2", th.Attempts)
	}
}

// TestJournalResumeAfterFailure: the model server fails one helper (500s)
// and the root gives up on seeing that; the run fails. Once the server is
// fixed, `formica resume` succeeds under the same id: the helper that had
// finished is reused, only the failed helper's calls (and the root's turn
// that failed) are made again.
func TestJournalResumeAfterFailure(t *testing.T) {
	t.Parallel()
	const rootTask = "one good helper, one bad"
	var broken atomicBool
	broken.set(true)
	srv := newChatServer(t, func(task string, req jRequest) jAnswer {
		switch {
		case task == rootTask && req.turn() == 0:
			return jAnswer{calls: []call{agentCall("good", "helper good"), agentCall("bad", "helper bad")}}
		case task == rootTask && strings.Contains(req.toolResults(), "failed"):
			return jAnswer{status: http.StatusInternalServerError}
		case task == rootTask:
			return jAnswer{text: "root: " + req.toolResults()}
		case task == "helper bad" && broken.get():
			return jAnswer{status: http.StatusInternalServerError}
		}
		return jAnswer{text: "done " + task}
	})
	c := startCoord(t, coordOpts{})
	c.startChatWorker("w1", 4, srv)
	id := c.submit(map[string]any{"task": rootTask, "agent": chatAgent(), "budget": map[string]any{"tokens": 1000}})
	if rec := c.waitFinal(id); rec.Status != event.Failed {
		t.Fatalf("run %s: %s (%s), want failed", id, rec.Status, rec.Error)
	}
	good, bad, root := srv.count("helper good", -1), srv.count("helper bad", -1), srv.count(rootTask, 0)

	broken.set(false)
	before := scrapeMetrics(t, c.api+"/metrics", c.token)
	r := c.cli("resume", "--wait", id)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "root: done helper good|done helper bad" {
		t.Fatalf("formica resume --wait %s: exit %d, stdout %q, stderr %s", id, r.code, r.stdout, r.stderr)
	}
	if got := srv.count("helper good", -1); got != good {
		t.Errorf("the good helper made %d more model calls, want none", got-good)
	}
	if got := srv.count("helper bad", -1); got != bad+1 {
		t.Errorf("the bad helper made %d more model calls, want 1", got-bad)
	}
	if got := srv.count(rootTask, 0); got != root {
		t.Errorf("the root made its first model call %d more times, want 0", got-root)
	}
	// The root replays its first turn; the good helper is reused through
	// the root's journaled result, never asked.
	checkMoved(t, "coordinator", before, scrapeMetrics(t, c.api+"/metrics", c.token), []moved{
		{"formica_journal_replays_total", nil, 1},
		{"formica_journal_threads_reused_total", nil, 1},
	})
	rec := c.record(id)
	if rec.Attempts != 2 || rec.Resumes != 1 {
		t.Errorf("record: %d attempts, %d resumes; want 2 and 1", rec.Attempts, rec.Resumes)
	}
	for _, th := range rec.Threads {
		if want := th.Name == "good"; th.Reused != want {
			t.Errorf("thread %s reused=%v, want %v", th.Name, th.Reused, want)
		}
	}
	// The resume runs under the submitted budget, which counts every token
	// once: the reused work of the first execution and the new calls.
	if rec.SubmittedBudget.Tokens != 1000 {
		t.Errorf("submitted budget after the resume: %+v", rec.SubmittedBudget)
	}
	total := rec.Usage.InputTokens + rec.Usage.OutputTokens
	if got := rec.Budget[limits.KindTokens]; total != 60 || got != (limits.Amount{Used: total, Limit: 1000}) {
		t.Errorf("budget tokens %+v, usage %d; want 60 used of 1000", got, total)
	}
	if got := rec.Budget[limits.KindSpawns].Used; got != 2 {
		t.Errorf("budget spawns used %d, want 2 (one reused, one placed again)", got)
	}
	if code, _, _ := c.do(http.MethodPost, "/v1/runs/"+id+"/resume", nil); code != http.StatusConflict {
		t.Errorf("resume of a run that succeeded: %d, want 409", code)
	}
}

// TestJournalLastDeliveryFails: a run whose coordinator dies on every
// delivery ends failed, with the reason, after its last delivery.
func TestJournalLastDeliveryFails(t *testing.T) {
	t.Parallel()
	srv := newChatServer(t, func(string, jRequest) jAnswer {
		return jAnswer{text: "never", wait: make(chan struct{})}
	})
	c := startCoord(t, coordOpts{extra: []string{"--queue-max-deliver", "2"}})
	c.startChatWorker("w1", 4, srv)
	id := c.submit(map[string]any{"task": "hang on every delivery", "agent": chatAgent()})
	srv.waitCount("hang on every delivery", 0, 1)
	c.kill9()
	c.restart()
	rec := c.waitFinal(id)
	if rec.Status != event.Failed || !strings.Contains(rec.Error, "gave up after 2 deliveries") {
		t.Fatalf("run %s: %s (%s), want failed for good after 2 deliveries", id, rec.Status, rec.Error)
	}
	if got := srv.count("hang on every delivery", -1); got != 1 {
		t.Errorf("the root ran %d times, want 1: the last delivery only settles it", got)
	}
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) set(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
func (b *atomicBool) get() bool  { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

// TestJournalCancelWhileCoordinatorDead: with NATS outside the coordinator,
// a run's coordinator is killed; `formica cancel` is sent while no
// coordinator runs; the coordinator that comes back ends the run cancelled
// and never starts it again.
func TestJournalCancelWhileCoordinatorDead(t *testing.T) {
	t.Parallel()
	ns, err := broker.StartServer(context.Background(), broker.ServerConfig{Listen: "127.0.0.1:-1", JetStream: true, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	const task = "wait for a cancel"
	srv := newChatServer(t, func(string, jRequest) jAnswer {
		return jAnswer{text: "never", wait: make(chan struct{})}
	})
	c := &coord{t: t, name: "coordinator", url: ns.ClientURL(), dataDir: t.TempDir(), cwd: t.TempDir()}
	for attempt := 1; ; attempt++ {
		port := proc.FreePorts(t, 1)[0]
		c.api = fmt.Sprintf("http://127.0.0.1:%d", port)
		c.args = []string{"--id", "coord", "--nats", c.url, "--data-dir", c.dataDir, "--cwd", c.cwd,
			"--http", fmt.Sprintf("127.0.0.1:%d", port), "--heartbeat", heartbeat, "--queue-ack-wait", ackWait, "--allow-scripted"}
		if c.start() {
			break
		}
		if attempt == 3 || !strings.Contains(c.p.Stderr.String(), "address already in use") {
			t.Fatalf("coordinator did not start (%s)", c.p.Status())
		}
	}
	c.startChatWorkerWith("w1", 4, srv) // the test's NATS server asks for no credentials
	id := c.submit(map[string]any{"task": task, "agent": chatAgent()})
	srv.waitCount(task, 0, 1)
	c.kill9()

	if r := c.cli("cancel", id); r.code != 0 {
		t.Fatalf("formica cancel with no coordinator: exit %d: %s", r.code, r.stderr)
	}
	var rec record.Run
	c.cliJSON(&rec, "get", id, "--json")
	if rec.Status != event.Running || rec.CancelRequested == "" {
		t.Fatalf("after the cancel: %s, cancel_requested %q; want running with the cancel recorded", rec.Status, rec.CancelRequested)
	}
	c.restart()
	rec = c.waitFinal(id)
	if rec.Status != event.Cancelled {
		t.Fatalf("run %s: %s (%s), want cancelled", id, rec.Status, rec.Error)
	}
	if got := srv.count(task, -1); got != 1 {
		t.Errorf("the root ran %d times, want 1: a cancelled run never starts again", got)
	}
}
