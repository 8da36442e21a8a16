package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
)

// memJournal keeps every thread's entries in memory, as the store would.
type memJournal struct {
	mu      sync.Mutex
	entries map[string][]journal.Entry
	syncs   int
	log     map[string][]string // per thread: the kinds appended, and "sync"
}

func (m *memJournal) Open(th *thread.Thread) ThreadJournal { return &memThread{m: m, id: th.ID} }

func (m *memJournal) of(id string) []journal.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]journal.Entry(nil), m.entries[id]...)
}

type memThread struct {
	m  *memJournal
	id string
}

func (t *memThread) Append(e journal.Entry) {
	t.m.mu.Lock()
	if t.m.entries == nil {
		t.m.entries = map[string][]journal.Entry{}
	}
	t.m.entries[t.id] = append(t.m.entries[t.id], e)
	t.m.logf(t.id, string(e.Kind))
	t.m.mu.Unlock()
}

func (t *memThread) Flush() {
	t.m.mu.Lock()
	t.m.logf(t.id, "flush")
	t.m.mu.Unlock()
}

func (t *memThread) Sync(context.Context) error {
	t.m.mu.Lock()
	t.m.syncs++
	t.m.logf(t.id, "sync")
	t.m.mu.Unlock()
	return nil
}

func (m *memJournal) logf(id, what string) {
	if m.log == nil {
		m.log = map[string][]string{}
	}
	m.log[id] = append(m.log[id], what)
}

// TestJournalSyncsOnlyWhatLaterWorkNeeds: a tool result is stored before
// the model call that sees it and a model response before its tool calls,
// but the start does not make the next model call wait, nor is it sent on
// its own: it goes with the next entry stored (the journal sends it itself
// if that is slow). A helper's result waits for the next sync too (the
// helper sent its end before it); other tool results are sent at once.
// The root's end is synced; a helper's end is sent before its result, not
// waited for (its parent stores the result before its next model call).
func TestJournalSyncsOnlyWhatLaterWorkNeeds(t *testing.T) {
	counter := &tools.Func{ToolName: "count", Desc: "counts", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { return "ran", nil }}
	root := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		results := 0
		for _, m := range req.Messages {
			if m.Role == model.RoleTool {
				results++
			}
		}
		switch results {
		case 0:
			return calls(spawnCall("call_1", "h", "help")), nil
		case 1:
			return calls(call("call_2", "count", map[string]int{})), nil
		}
		return text("done"), nil
	}}
	helper := &fakeModel{fn: func(context.Context, model.Request) (model.Response, error) { return text("helped"), nil }}
	j := &memJournal{}
	r, err := newInProcess(Config{Models: models{"fake:root": root, "fake:helper": helper}, DefaultModel: "fake:root",
		Tools: []tools.Tool{counter}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	a := generalAgent()
	a.Tools = append(a.Tools, "count")
	a.Helper = spec.Helper{Model: "fake:helper"}
	res := run(t, r, RunRequest{ID: "run", Task: "go", Agent: a, Limits: limitsFor(4)})
	if res.Status != event.Succeeded {
		t.Fatalf("run: %+v", res.Result)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	want := []string{"start", "model", "sync", "spawn", "tool", "sync", "model", "sync", "tool", "flush", "sync", "model", "end", "sync"}
	if diff := cmp.Diff(want, j.log[res.RootID]); diff != "" {
		t.Errorf("root's journal writes (-want +got):\n%s", diff)
	}
	helperID := journal.ThreadID("run", res.RootID, journal.CallKey(0, "call_1"))
	if diff := cmp.Diff([]string{"start", "model", "end", "flush"}, j.log[helperID]); diff != "" {
		t.Errorf("helper's journal writes (-want +got):\n%s", diff)
	}
	// The parent journals its spawn: the call, the helper's id.
	for _, e := range j.entries[res.RootID] {
		if e.Kind == journal.KindSpawn && (e.Turn != 0 || e.CallID != "call_1" || e.Child != helperID || e.Name != "h" || e.Task != "help") {
			t.Errorf("spawn entry %+v; want turn 0, call_1, child %s, h, help", e, helperID)
		}
	}
}

// TestJournalRefusedSpawn: a spawn the limits refuse is journaled by its
// parent as a refusal with the reason, and no spawn.
func TestJournalRefusedSpawn(t *testing.T) {
	root := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(spawnCall("call_1", "h", "help")), nil
		}
		return text("root done"), nil
	}}
	helper := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(spawnCall("call_1", "deep", "go deeper")), nil // depth 2: past the limit
		}
		return text("helped alone"), nil
	}}
	j := &memJournal{}
	r, err := newInProcess(Config{Models: models{"fake:root": root, "fake:helper": helper}, DefaultModel: "fake:root", Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	a := generalAgent()
	a.Helper = spec.Helper{Model: "fake:helper"}
	res := run(t, r, RunRequest{ID: "run", Task: "go", Agent: a, Limits: limits.Config{MaxDepth: 1, MaxThreads: 4}})
	if res.Status != event.Succeeded {
		t.Fatalf("run: %+v", res.Result)
	}
	helperID := journal.ThreadID("run", res.RootID, journal.CallKey(0, "call_1"))
	var kinds []journal.Kind
	for _, e := range j.of(helperID) {
		kinds = append(kinds, e.Kind)
		if e.Kind == journal.KindRefusal && (e.CallID != "call_1" || e.Reason != string(limits.ReasonDepth) || e.Name != "deep") {
			t.Errorf("refusal entry %+v; want call_1, reason depth, name deep", e)
		}
	}
	want := []journal.Kind{journal.KindStart, journal.KindModel, journal.KindRefusal, journal.KindTool, journal.KindModel, journal.KindEnd}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("helper's entries (-want +got):\n%s", diff)
	}
}

func TestReplayReusesModelResponsesAndToolResults(t *testing.T) {
	var ran atomic.Int32
	counter := &tools.Func{ToolName: "count", Desc: "counts", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { ran.Add(1); return "ran", nil }}
	var failSecond atomic.Bool
	failSecond.Store(true)
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(call("call_1", "count", map[string]int{}), call("call_2", "count", map[string]int{})), nil
		}
		if failSecond.Load() {
			return model.Response{}, errors.New("server down")
		}
		return text("done: " + joinResults(req)), nil
	}}
	j := &memJournal{}
	r, err := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Tools: []tools.Tool{counter}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	th := thread.Thread{RunID: "run", ID: "t1", Path: "root", Name: "root", Task: "count twice",
		Agent: spec.Agent{Name: "root", Tools: []string{"count"}}, Cwd: t.TempDir()}

	first := r.RunThread(context.Background(), &th)
	if first.Status != event.Failed || ran.Load() != 2 || len(m.requests()) != 2 {
		t.Fatalf("first run: %+v, tools ran %d, model calls %d", first, ran.Load(), len(m.requests()))
	}

	failSecond.Store(false)
	th.Replay = j.of("t1")
	second := r.RunThread(context.Background(), &th)
	if second.Status != event.Succeeded || second.Output != "done: ran|ran" {
		t.Fatalf("second run: %+v", second)
	}
	if ran.Load() != 2 {
		t.Errorf("tools ran %d times in all, want 2: journaled results are reused", ran.Load())
	}
	reqs := m.requests()
	if len(reqs) != 3 {
		t.Fatalf("model calls %d in all, want 3: the journaled first response is reused", len(reqs))
	}
	// Usage counts each response once: the reused one plus the new one.
	if second.Own.InputTokens != 20 {
		t.Errorf("own usage %+v, want 20 input tokens", second.Own)
	}

	// The transcript is what the model saw, message for message.
	tr := journal.BuildTranscript("run", "t1", j.of("t1"))
	want := append(append([]model.Message(nil), reqs[2].Messages...), model.Message{Role: model.RoleAssistant, Content: second.Output})
	if diff := cmp.Diff(want, tr.Messages); diff != "" {
		t.Errorf("transcript messages (-want +got):\n%s", diff)
	}
	if tr.Status != event.Succeeded || tr.Usage.InputTokens != 20 {
		t.Errorf("transcript status %s usage %+v", tr.Status, tr.Usage)
	}

	// A thread that finished is never run again.
	th.Replay = j.of("t1")
	third := r.RunThread(context.Background(), &th)
	if third.Output != second.Output || len(m.requests()) != 3 || ran.Load() != 2 {
		t.Errorf("finished thread ran again: %+v, model calls %d", third, len(m.requests()))
	}
}

func TestReplayAsksAFailedHelperAgainAndStopsReplayingThere(t *testing.T) {
	var helperFails atomic.Bool
	helperFails.Store(true)
	root := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(spawnCall("call_1", "ok", "fine"), spawnCall("call_2", "bad", "flaky")), nil
		}
		if strings.Contains(joinResults(req), "failed") {
			return model.Response{}, errors.New("the root gives up")
		}
		return text("root: " + joinResults(req)), nil
	}}
	helper := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if task(req) == "flaky" && helperFails.Load() {
			return model.Response{}, errors.New("500")
		}
		return text("did " + task(req)), nil
	}}
	j := &memJournal{}
	r, err := newInProcess(Config{Models: models{"fake:root": root, "fake:helper": helper}, DefaultModel: "fake:root", Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	a := generalAgent()
	a.Helper = spec.Helper{Model: "fake:helper"}
	res := run(t, r, RunRequest{ID: "run", Task: "go", Agent: a, Limits: limitsFor(4)})
	if res.Status != event.Failed {
		t.Fatalf("first run: %+v", res.Result)
	}
	rootID := res.RootID
	helperCalls := len(helper.requests())

	helperFails.Store(false)
	th := thread.Thread{RunID: "run", ID: rootID, Path: "root", Name: a.Name, Task: "go", Agent: a, Cwd: t.TempDir(),
		Permissions: policy.Permissions{a.Harness.Permissions}, Replay: j.of(rootID)}
	// The helper that succeeded finished: its journal says so.
	okID := journal.ThreadID("run", rootID, journal.CallKey(0, "call_1"))
	if _, ok := journal.NewReplay(j.of(okID)).Finished(); !ok {
		t.Fatalf("the helper that succeeded has no end in its journal")
	}
	again := r.runAgain(t, th, limitsFor(4))
	if again.Output != "root: did fine|did flaky" {
		t.Fatalf("again: %q %s", again.Output, again.Error)
	}
	if got := len(helper.requests()) - helperCalls; got != 1 {
		t.Errorf("helpers called the model %d more times, want 1 (only the failed one)", got)
	}
	if got := len(root.requests()); got != 3 {
		t.Errorf("root called the model %d times in all, want 3 (its first response reused)", got)
	}
}

// runAgain runs th under a ledger, as Run would, with th's own id.
func (r *Runner) runAgain(t *testing.T, th thread.Thread, lim limits.Config) thread.Result {
	t.Helper()
	ledger, err := limits.New(lim)
	if err != nil {
		t.Fatal(err)
	}
	l := r.cfg.Spawner.(*local)
	l.ledgers.Store(th.RunID, ledger)
	defer l.ledgers.Delete(th.RunID)
	l.threads.Store(th.ID, &th)
	defer l.threads.Delete(th.ID)
	return r.RunThread(context.Background(), &th)
}

func TestReplayReusesApprovalsOfCallsThatDidNotFinish(t *testing.T) {
	cwd := t.TempDir()
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if !hasToolResults(req) {
			return calls(model.ToolCall{ID: "w", Name: "write_file", Arguments: `{"path":"out.txt","content":"hi"}`}), nil
		}
		return text("wrote: " + joinResults(req)), nil
	}}
	var asked atomic.Int32
	approver := policy.ApproverFunc(func(context.Context, policy.ApprovalRequest) (policy.Approval, error) {
		asked.Add(1)
		return policy.Approval{Allow: true}, nil
	})
	j := &memJournal{}
	r, err := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Approver: approver, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	a := spec.Default().Agent // write_file asks
	a.Model = "fake:root"
	th := thread.Thread{RunID: "run", ID: "t1", Path: "root", Name: a.Name, Task: "write", Agent: a, Cwd: cwd,
		Permissions: policy.Permissions{a.Harness.Permissions}}
	if res := r.RunThread(context.Background(), &th); res.Status != event.Succeeded || asked.Load() != 1 {
		t.Fatalf("first run: %+v, asked %d", res, asked.Load())
	}
	// The thread died after the approval, before the write's result was
	// journaled: keep everything but that result and the turns after it.
	var kept []journal.Entry
	for _, e := range j.of("t1") {
		if e.Kind == journal.KindStart || e.Kind == journal.KindApproval || (e.Kind == journal.KindModel && e.Turn == 0) {
			kept = append(kept, e)
		}
	}
	th.Replay = kept
	res := r.RunThread(context.Background(), &th)
	if res.Status != event.Succeeded || asked.Load() != 1 {
		t.Fatalf("second run: %+v, asked %d times in all; want the journaled decision reused", res, asked.Load())
	}
	if got := len(m.requests()); got != 3 {
		t.Errorf("%d model calls in all, want 3 (turn 0 reused)", got)
	}
}

// fullJournal is a memJournal whose Sync refuses, as the store does once a
// thread's journal holds its limit, after the first full syncs.
type fullJournal struct {
	memJournal
	full int
}

func (f *fullJournal) Open(th *thread.Thread) ThreadJournal {
	return &fullThread{memThread{m: &f.memJournal, id: th.ID}, f}
}

type fullThread struct {
	memThread
	f *fullJournal
}

func (t *fullThread) Sync(ctx context.Context) error {
	_ = t.memThread.Sync(ctx)
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.f.syncs > t.f.full {
		return fmt.Errorf("%w: thread %s has journaled the most messages a thread may (coordinator --journal-max-thread-msgs)", journal.ErrLimit, t.id)
	}
	return nil
}

// TestJournalLimitFailsTheThread: once its journal refuses its writes for
// a limit, a thread calls neither its model nor its tools again: it fails
// at once with the journal's error, which names the limit, and its parent
// sees it as the helper's failure.
func TestJournalLimitFailsTheThread(t *testing.T) {
	var ran atomic.Int32
	counter := &tools.Func{ToolName: "count", Desc: "counts", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { ran.Add(1); return "ran", nil }}
	m := &fakeModel{fn: func(context.Context, model.Request) (model.Response, error) {
		return calls(call("call_1", "count", map[string]int{})), nil // forever, were it allowed
	}}
	j := &fullJournal{full: 2}
	r, err := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Tools: []tools.Tool{counter}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	a := generalAgent()
	a.Tools = []string{"count"}
	res := run(t, r, RunRequest{ID: "run", Task: "count", Agent: a, Limits: limitsFor(1)})
	if res.Status != event.Failed || !strings.Contains(res.Error, "journal limit reached") || !strings.Contains(res.Error, "--journal-max-thread-msgs") {
		t.Fatalf("run: %s %q; want failed naming the journal's limit", res.Status, res.Error)
	}
	// Two syncs stored (the first response; its result before the second
	// call), the third refused: the second response's call never ran.
	if calls, tools := len(m.requests()), ran.Load(); calls != 2 || tools != 1 {
		t.Errorf("after the refusal: %d model calls, %d tool calls; want 2 and 1", calls, tools)
	}
}

// TestJournalKnowsTheAgentTool: the journal finds a thread's helpers by the
// agent tool's name.
func TestJournalKnowsTheAgentTool(t *testing.T) {
	if journal.AgentTool != tools.AgentToolName || (agentTool{}).Name() != journal.AgentTool {
		t.Errorf("journal.AgentTool %q, tools.AgentToolName %q", journal.AgentTool, tools.AgentToolName)
	}
}
