package runner

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
)

// These tests run threads on a real JetStream journal (an embedded NATS
// server), with real bash, and cut the first execution of a thread while
// one of its tool calls runs, as a crash would; the thread then runs
// again from its journal.

// waitBound bounds every wait of these tests.
const waitBound = 30 * time.Second

// storeJournal journals every thread in a JetStream store under one
// placement, which a coordinator's entry vouches for (journal.Trusted).
type storeJournal struct {
	t     *testing.T
	s     *store.Store
	token string
}

func newStoreJournal(t *testing.T) *storeJournal {
	t.Helper()
	nc, err := brokertest.Start(t).Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	s, err := store.Open(ctx, nc, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &storeJournal{t: t, s: s, token: "tok-1"}
}

func (j *storeJournal) Open(th *thread.Thread) ThreadJournal {
	c := j.s.Journal(th.RunID, th.ID, j.token, true)
	c.Append(journal.Entry{Kind: journal.KindPlacement, Worker: "w1", Attempt: 1})
	c.Flush()
	return j.s.Journal(th.RunID, th.ID, j.token, false)
}

// read returns thread id's trusted entries, as the coordinator hands them
// to a thread that runs again.
func (j *storeJournal) read(run, id string) []journal.Entry {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	es, err := j.s.ReadJournal(ctx, run, id)
	if err != nil {
		j.t.Fatal(err)
	}
	return journal.Trusted(es)
}

// fifoSignal makes a named pipe at path; the channel is closed once a
// writer has written to it and closed it (bash: echo go > path), and the
// pipe removed, so a call run again does not wait on it.
func fifoSignal(t *testing.T, path string) <-chan struct{} {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		f, err := os.Open(path) // until a writer opens it
		if err != nil {
			return
		}
		buf := make([]byte, 16)
		for {
			if _, err := f.Read(buf); err != nil {
				break
			}
		}
		f.Close()
		os.Remove(path)
		close(done)
	}()
	t.Cleanup(func() {
		// Unblocks the reader when no writer ever came.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return done
}

// markCommand appends a line to mark.txt and, while the pipe "running"
// exists, says so through it and sleeps until it is killed.
const markCommand = "echo ran >> mark.txt; if [ -p running ]; then echo go > running; sleep 60; fi; echo finished"

// marks counts the lines of cwd/mark.txt.
func marks(t *testing.T, cwd string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cwd, "mark.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// onceCase is one thread whose first execution is cut while its one tool
// call runs, and which then runs again from its journal.
type onceCase struct {
	harness  spec.Harness
	tool     model.ToolCall // the one call of the thread's first turn
	extra    []tools.Tool
	approver policy.Approver
}

// onceRun is what a onceCase did.
type onceRun struct {
	cwd    string
	j      *storeJournal
	model  *fakeModel
	events *collector
	// atCut is the thread's journal as stored while the call ran.
	atCut   []journal.Entry
	again   thread.Result
	entries []journal.Entry // the journal after the second execution
}

// run executes the case: the first execution is cancelled once running
// is closed (the call is under way), the second runs to its end.
func (oc onceCase) run(t *testing.T, cwd string, running <-chan struct{}) onceRun {
	t.Helper()
	or := onceRun{cwd: cwd, j: newStoreJournal(t), events: &collector{}}
	or.model = &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(oc.tool), nil
		}
		return text("saw: " + joinResults(req)), nil
	}}
	r, err := newInProcess(Config{Models: models{"fake:root": or.model}, DefaultModel: "fake:root", Journal: or.j,
		Events: or.events, Tools: oc.extra, Approver: oc.approver})
	if err != nil {
		t.Fatal(err)
	}
	a := spec.Agent{Name: "root", Harness: oc.harness}
	for _, x := range oc.extra {
		a.Tools = append(a.Tools, x.Name())
	}
	th := thread.Thread{RunID: "run-1", ID: "t1", Path: "root", Name: "root", Task: "do it once", Agent: a, Cwd: cwd}

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan thread.Result, 1)
	go func() { first <- r.RunThread(ctx, &th) }()
	select {
	case <-running:
	case res := <-first:
		cancel()
		t.Fatalf("the first execution ended before its call ran: %+v", res)
	case <-time.After(waitBound):
		cancel()
		t.Fatal("the call never started")
	}
	or.atCut = or.j.read(th.RunID, th.ID)
	cancel() // the crash: the call is cut before its result is journaled
	select {
	case res := <-first:
		if res.Status != event.Cancelled {
			t.Fatalf("first execution: %+v, want cancelled", res)
		}
	case <-time.After(waitBound):
		t.Fatal("the first execution did not end on its cancel")
	}

	th.Replay = or.j.read(th.RunID, th.ID)
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitBound)
	defer cancel2()
	or.again = r.RunThread(ctx2, &th)
	if or.again.Status != event.Succeeded {
		t.Fatalf("second execution: %+v", or.again)
	}
	or.entries = or.j.read(th.RunID, th.ID)
	return or
}

// toolEntries are the journal's tool entries of call id, by status.
func toolEntries(es []journal.Entry, id string) []string {
	var out []string
	for _, e := range es {
		if e.Kind == journal.KindTool && e.CallID == id {
			out = append(out, e.ToolStatus)
		}
	}
	return out
}

// inDoubtResults are the tool.result events that say in_doubt.
func inDoubtResults(c *collector) int {
	n := 0
	for _, e := range c.of(event.ToolResult) {
		if e.InDoubt {
			n++
		}
	}
	return n
}

func bashCase(h spec.Harness) onceCase {
	return onceCase{harness: h, tool: call("call_1", "bash", map[string]string{"command": markCommand})}
}

// TestAtMostOnceBashNotRunAgain: a bash call under at_most_once, cut while
// it runs, is journaled as started before it ran; the thread that runs
// again does not run it (the mark has one line), tells the model it is in
// doubt, and its journal, transcript and events say in_doubt.
func TestAtMostOnceBashNotRunAgain(t *testing.T) {
	cwd := t.TempDir()
	running := fifoSignal(t, filepath.Join(cwd, "running"))
	or := bashCase(spec.Harness{AtMostOnce: []string{"bash"}}).run(t, cwd, running)

	if got := toolEntries(or.atCut, "call_1"); len(got) != 1 || got[0] != journal.ToolStarted {
		t.Errorf("while bash ran, the stored journal had %v for it; want its start", got)
	}
	if n := marks(t, cwd); n != 1 {
		t.Errorf("mark.txt has %d lines, want 1: bash ran again", n)
	}
	want := InDoubtText("bash", "")
	reqs := or.model.requests()
	if got := joinResults(reqs[len(reqs)-1]); got != want {
		t.Errorf("the model saw %q\nwant %q", got, want)
	}
	if got := toolEntries(or.entries, "call_1"); strings.Join(got, ",") != "started,in_doubt" {
		t.Errorf("journal has %v for the call, want started then in_doubt", got)
	}
	tr := journal.BuildTranscript("run-1", "t1", or.entries)
	if tr.InDoubt != 1 || tr.Status != event.Succeeded {
		t.Errorf("transcript: %d in doubt, status %s; want 1, succeeded", tr.InDoubt, tr.Status)
	}
	var shown []string
	for _, m := range tr.Messages {
		if m.Role == model.RoleTool {
			shown = append(shown, m.Content)
		}
	}
	if len(shown) != 1 || shown[0] != want {
		t.Errorf("transcript's tool messages %q, want the in-doubt text once", shown)
	}
	if n := inDoubtResults(or.events); n != 1 {
		t.Errorf("%d tool.result events in doubt, want 1", n)
	}

	// Run once more: the in-doubt answer is reused, bash still not run.
	r, err := newInProcess(Config{Models: models{"fake:root": or.model}, DefaultModel: "fake:root", Journal: or.j})
	if err != nil {
		t.Fatal(err)
	}
	th := thread.Thread{RunID: "run-1", ID: "t1", Path: "root", Name: "root", Task: "do it once",
		Agent: spec.Agent{Name: "root", Harness: spec.Harness{AtMostOnce: []string{"bash"}}}, Cwd: cwd, Replay: or.entries}
	if res := r.RunThread(context.Background(), &th); res.Output != or.again.Output || marks(t, cwd) != 1 {
		t.Errorf("third execution: %+v, %d marks", res, marks(t, cwd))
	}
}

// TestWithoutAtMostOnceBashRunsAgain: the same call without at_most_once
// journals no start and runs again (at least once).
func TestWithoutAtMostOnceBashRunsAgain(t *testing.T) {
	cwd := t.TempDir()
	running := fifoSignal(t, filepath.Join(cwd, "running"))
	or := bashCase(spec.Harness{AtMostOnce: []string{"read_*"}}).run(t, cwd, running)
	if got := toolEntries(or.atCut, "call_1"); len(got) != 0 {
		t.Errorf("while bash ran, the journal had %v for it; want nothing", got)
	}
	if n := marks(t, cwd); n != 2 {
		t.Errorf("mark.txt has %d lines, want 2: bash runs again", n)
	}
	if got := toolEntries(or.entries, "call_1"); strings.Join(got, ",") != "ok" {
		t.Errorf("journal has %v for the call, want ok", got)
	}
	if n := inDoubtResults(or.events); n != 0 {
		t.Errorf("%d tool.result events in doubt, want none", n)
	}
}

// payTool is an MCP-like tool that counts its runs and blocks until its
// call is cancelled; running is closed on its first run.
func payTool(name string, runs *atomic.Int32, running chan<- struct{}) tools.Tool {
	var once sync.Once
	return &tools.Func{ToolName: name, Desc: "pays", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
			if runs.Add(1) > 1 {
				return "paid again", nil
			}
			once.Do(func() { close(running) })
			<-ctx.Done()
			return "", ctx.Err()
		}}
}

// TestAtMostOnceGlob: mcp__pay__* covers mcp__pay__charge, not
// mcp__payroll__run.
func TestAtMostOnceGlob(t *testing.T) {
	for _, tc := range []struct {
		tool string
		runs int32
	}{
		{"mcp__pay__charge", 1},
		{"mcp__payroll__run", 2},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			var runs atomic.Int32
			running := make(chan struct{})
			oc := onceCase{harness: spec.Harness{AtMostOnce: []string{"mcp__pay__*"}},
				tool: call("call_1", tc.tool, map[string]int{"cents": 500}), extra: []tools.Tool{payTool(tc.tool, &runs, running)}}
			or := oc.run(t, t.TempDir(), running)
			if runs.Load() != tc.runs {
				t.Errorf("%s ran %d times, want %d", tc.tool, runs.Load(), tc.runs)
			}
			if inDoubt := inDoubtResults(or.events) == 1; inDoubt != (tc.runs == 1) {
				t.Errorf("in doubt: %v", inDoubt)
			}
		})
	}
}

// TestInDoubtAsk: with in_doubt: ask, the call in doubt goes to the
// approver, marked in doubt; allow runs it again, deny reports it in
// doubt with the reason, and the decision is journaled as an approval in
// doubt, which no permission question reuses.
func TestInDoubtAsk(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(map[bool]string{true: "allow", false: "deny"}[allow], func(t *testing.T) {
			var mu sync.Mutex
			var asked []policy.ApprovalRequest
			approver := policy.ApproverFunc(func(_ context.Context, req policy.ApprovalRequest) (policy.Approval, error) {
				mu.Lock()
				asked = append(asked, req)
				mu.Unlock()
				if allow {
					return policy.Approval{Allow: true}, nil
				}
				return policy.Approval{Reason: "denied by a user"}, nil
			})
			cwd := t.TempDir()
			running := fifoSignal(t, filepath.Join(cwd, "running"))
			oc := bashCase(spec.Harness{AtMostOnce: []string{"bash"}, InDoubt: spec.InDoubtAsk})
			oc.approver = approver
			or := oc.run(t, cwd, running)

			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || !asked[0].InDoubt || asked[0].Tool != "bash" || asked[0].CallID != "0/call_1/in_doubt/1" ||
				!strings.Contains(asked[0].Arguments, "mark.txt") {
				t.Fatalf("asked %+v; want one question in doubt about the bash call", asked)
			}
			wantMarks, wantStatus := 1, "started,in_doubt"
			if allow {
				wantMarks, wantStatus = 2, "started,started,ok"
			}
			if n := marks(t, cwd); n != wantMarks {
				t.Errorf("mark.txt has %d lines, want %d", n, wantMarks)
			}
			if got := strings.Join(toolEntries(or.entries, "call_1"), ","); got != wantStatus {
				t.Errorf("journal has %s for the call, want %s", got, wantStatus)
			}
			if !allow && !strings.Contains(or.again.Output, InDoubtText("bash", "asked whether to run it again: denied by a user")) {
				t.Errorf("output %q lacks the in-doubt text with the reason", or.again.Output)
			}
			var approvals []journal.Entry
			for _, e := range or.entries {
				if e.Kind == journal.KindApproval {
					approvals = append(approvals, e)
				}
			}
			if len(approvals) != 1 || !approvals[0].InDoubt || approvals[0].Allow != allow {
				t.Errorf("journaled approvals %+v; want the one decision, in doubt", approvals)
			}
			if _, ok := journal.NewReplay(or.entries).Approval(0, "call_1"); ok {
				t.Error("replay reuses the in-doubt decision as a permission decision")
			}
			reqs := or.events.of(event.ApprovalRequested)
			if len(reqs) != 1 || !reqs[0].InDoubt {
				t.Errorf("approval.requested events %+v; want one in doubt", reqs)
			}
		})
	}
}

// TestAtMostOnceStartNotStored: a call whose start cannot be stored does
// not run, and says why.
func TestAtMostOnceStartNotStored(t *testing.T) {
	cwd := t.TempDir()
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(call("call_1", "bash", map[string]string{"command": "echo ran >> mark.txt"})), nil
		}
		return text(joinResults(req)), nil
	}}
	r, err := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Journal: failingJournal{}})
	if err != nil {
		t.Fatal(err)
	}
	th := thread.Thread{RunID: "run-1", ID: "t1", Path: "root", Name: "root", Task: "once",
		Agent: spec.Agent{Name: "root", Harness: spec.Harness{AtMostOnce: []string{"bash"}}}, Cwd: cwd}
	res := r.RunThread(context.Background(), &th)
	if !strings.Contains(res.Output, "not run: its start could not be journaled") {
		t.Errorf("output %q", res.Output)
	}
	if _, err := os.Stat(filepath.Join(cwd, "mark.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bash ran: %v", err)
	}
}

// failingJournal stores nothing and says so on every Sync.
type failingJournal struct{}

func (failingJournal) Open(*thread.Thread) ThreadJournal { return failingJournal{} }
func (failingJournal) Append(journal.Entry)              {}
func (failingJournal) Flush()                            {}
func (failingJournal) Sync(context.Context) error        { return errors.New("the stream is gone") }

// TestHelperKeepsAtMostOnce: a helper journals starts for its parent's
// at-most-once tools and for those its template adds; its parent only
// for its own.
func TestHelperKeepsAtMostOnce(t *testing.T) {
	var runs atomic.Int32
	pay := &tools.Func{ToolName: "mcp__pay__charge", Desc: "pays", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { runs.Add(1); return "paid", nil }}
	work := []model.ToolCall{call("call_b", "bash", map[string]string{"command": "echo ran >> mark.txt"}),
		call("call_p", "mcp__pay__charge", map[string]int{"cents": 5})}
	root := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(append([]model.ToolCall{spawnCall("call_h", "h", "pay")}, work...)...), nil
		}
		return text("root done"), nil
	}}
	helper := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(work...), nil
		}
		return text("helper done"), nil
	}}
	j := newStoreJournal(t)
	r, err := newInProcess(Config{Models: models{"fake:root": root, "fake:helper": helper}, DefaultModel: "fake:root",
		Tools: []tools.Tool{pay}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	a := generalAgent()
	a.Tools = append(a.Tools, "mcp__pay__charge")
	a.Harness.AtMostOnce = []string{"bash"}
	a.Helper = spec.Helper{Model: "fake:helper", AtMostOnce: []string{"mcp__pay__*"}}
	res := run(t, r, RunRequest{ID: "run", Task: "go", Agent: a, Limits: limitsFor(4)})
	if res.Status != event.Succeeded {
		t.Fatalf("run: %+v", res.Result)
	}
	helperID := journal.ThreadID("run", res.RootID, journal.CallKey(0, "call_h"))
	for _, tc := range []struct {
		thread    string
		bash, pay string
	}{
		{res.RootID, "started,ok", "ok"},
		{helperID, "started,ok", "started,ok"},
	} {
		es := j.read("run", tc.thread)
		if got := strings.Join(toolEntries(es, "call_b"), ","); got != tc.bash {
			t.Errorf("thread %s: bash journaled as %s, want %s", tc.thread, got, tc.bash)
		}
		if got := strings.Join(toolEntries(es, "call_p"), ","); got != tc.pay {
			t.Errorf("thread %s: mcp__pay__charge journaled as %s, want %s", tc.thread, got, tc.pay)
		}
	}
}
