package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/openai"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
)

// bytesPerTokenMeasured is how the tests turn a window in tokens into the
// bytes a request may take, and the bytes of a request into the tokens
// the server reports: about 4.4 bytes a token.
const bytesPerTokenMeasured = 4.4

// recordingServer speaks OpenAI's Chat Completions wire format and records
// every request's body. Its model calls bash `calls` times, one call a
// turn, each printing 8,000 bytes, then answers "done"; a request without
// tools (a summary) is answered with a summary. It reports the prompt's
// tokens as the body's bytes over bytesPerTokenMeasured. Its answers
// depend only on the request, so a thread run again gets the same ones.
type recordingServer struct {
	*httptest.Server
	calls int
	// hook, when set, sees each request's number (from 1) before it is
	// answered.
	hook func(n int)

	mu     sync.Mutex
	bodies [][]byte
}

func newRecordingServer(t *testing.T, calls int) *recordingServer {
	t.Helper()
	s := &recordingServer{calls: calls}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

// chatBody is what the server reads of a request.
type chatBody struct {
	Messages []json.RawMessage `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type chatMsg struct {
	Role      string `json:"role"`
	ToolCalls []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
}

func (s *recordingServer) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req chatBody
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	n := len(s.bodies)
	s.mu.Unlock()
	if s.hook != nil {
		s.hook(n)
	}
	// The next call's number follows the last call's id (call_N): the
	// latest turn is never summarized away.
	next := 1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		var m chatMsg
		_ = json.Unmarshal(req.Messages[i], &m)
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			k, _ := strconv.Atoi(strings.TrimPrefix(m.ToolCalls[0].ID, "call_"))
			next = k + 1
			break
		}
	}
	msg := map[string]any{"role": "assistant", "content": "done"}
	finish := "stop"
	switch {
	case len(req.Tools) == 0:
		msg["content"] = "Summary: the agent ran bash calls that each printed 8,000 bytes of a numbered line."
	case next <= s.calls:
		cmd := fmt.Sprintf("yes 'output of call %02d' | head -c 8000", next)
		args, _ := json.Marshal(map[string]string{"command": cmd})
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": fmt.Sprintf("call_%d", next), "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}}}
		finish = "tool_calls"
	}
	prompt := int(float64(len(body)) / bytesPerTokenMeasured)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1741570283, "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20},
	})
}

func (s *recordingServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// windowThread is a thread of the model at srv under context_window
// window, with bash allowed, and a runner journaling into j.
func windowThread(t *testing.T, srv *recordingServer, j *memJournal, window int64) (*Runner, thread.Thread) {
	t.Helper()
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := newInProcess(Config{Journal: j, DefaultModel: "openai:m",
		Models: ModelOpenerFunc(func(ref string) (model.Model, error) {
			if ref != "openai:m" {
				return nil, fmt.Errorf("%w: %s", model.ErrUnknownProvider, ref)
			}
			return m, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	a := spec.Agent{Name: "root", Instructions: "You run commands.", Model: "openai:m", ContextWindow: window,
		Harness: spec.Harness{Tools: []string{"bash"}, Permissions: policy.Permission{Default: policy.Allow}}}
	return r, thread.Thread{RunID: "run", ID: "t1", Path: "root", Name: "root", Task: "Run the 30 commands, one at a time.",
		Agent: a, Cwd: t.TempDir(), Permissions: policy.Permissions{a.Harness.Permissions}}
}

// messagesOf returns a request body's messages, each as its JSON text.
func messagesOf(t *testing.T, body []byte) []string {
	t.Helper()
	var req chatBody
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(req.Messages))
	for i, m := range req.Messages {
		out[i] = string(m)
	}
	return out
}

func isPrefix(a, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A thread that makes 30 bash calls of 8,000 bytes each (about 60k tokens
// in all) under a 32k window finishes: no request passes the window, old
// results are elided in large steps so that most requests extend the one
// before unchanged, and the transcript shows the elisions where they were
// made, with the conversation as the last request had it.
func TestContextWindowElidesOldResults(t *testing.T) {
	const window = 32000
	srv := newRecordingServer(t, 30)
	j := &memJournal{}
	r, th := windowThread(t, srv, j, window)
	res := r.RunThread(context.Background(), &th)
	if res.Status != event.Succeeded || res.Output != "done" {
		t.Fatalf("thread: %s %q %s", res.Status, res.Output, res.Error)
	}
	bodies := srv.requests()
	if len(bodies) != 31 {
		t.Fatalf("%d requests, want 31 (30 calls, then the answer)", len(bodies))
	}
	limit := int(window * bytesPerTokenMeasured)
	extended, largest := 0, 0
	for i, b := range bodies {
		largest = max(largest, len(b))
		if len(b) > limit {
			t.Errorf("request %d is %d bytes, over the window's %d", i+1, len(b), limit)
		}
		if i > 0 && isPrefix(messagesOf(t, bodies[i-1]), messagesOf(t, b)) {
			extended++
		}
	}
	if pairs := len(bodies) - 1; extended*10 < pairs*8 {
		t.Errorf("%d of %d requests extend the one before unchanged, want at least 80%%", extended, pairs)
	}
	t.Logf("largest request %d bytes of the %d allowed; %d of %d requests extend the one before", largest, limit, extended, len(bodies)-1)

	tr := journal.BuildTranscript("run", "t1", j.of("t1"))
	var elisions, elided int
	for i, e := range tr.Entries {
		if e.Kind == journal.KindSummary {
			t.Errorf("a summary was made; elisions should have been enough")
		}
		if e.Kind != journal.KindElision {
			continue
		}
		elisions++
		elided += len(e.Elided)
		// In place: after the results it elides, before its turn's response.
		if next := tr.Entries[i+1]; next.Kind != journal.KindModel || next.Turn != e.Turn {
			t.Errorf("elision of turn %d is followed by %s of turn %d", e.Turn, next.Kind, next.Turn)
		}
		if e.TokensBefore <= int64(0.8*window) || e.TokensAfter > window/2 || e.Window != window {
			t.Errorf("elision of turn %d: %d tokens before, %d after, window %d", e.Turn, e.TokensBefore, e.TokensAfter, e.Window)
		}
		for _, el := range e.Elided {
			if el.Tool != "bash" || el.Bytes < 8000 || !strings.HasPrefix(el.CallID, "call_") {
				t.Errorf("elided %+v", el)
			}
		}
	}
	t.Logf("%d elisions of %d results", elisions, elided)
	if elisions == 0 || elisions > 5 || elided < 10 {
		t.Errorf("%d elisions of %d results in all; want a few large ones", elisions, elided)
	}
	// The transcript's conversation is the last request's, then the answer.
	last := messagesOf(t, bodies[len(bodies)-1])
	if got := len(tr.Messages); got != len(last)+1 {
		t.Fatalf("transcript has %d messages, the last request %d", got, len(last))
	}
	markers := 0
	for i, m := range tr.Messages[:len(last)] {
		if journal.IsElided(m.Content) {
			markers++
			if !strings.Contains(last[i], "result elided to fit the context window") {
				t.Errorf("message %d is elided in the transcript, not in the request: %.100s", i, last[i])
			}
		}
	}
	if markers != elided {
		t.Errorf("%d markers in the transcript, %d results elided", markers, elided)
	}
}

// A thread killed mid-way and resumed from its journal sends the same
// requests as one that was never stopped: the elisions it journaled are
// made again at the same turns, and the ones it had not made yet are made
// as they would have been.
func TestContextWindowResumeSendsTheSameRequests(t *testing.T) {
	const window = 32000
	ref := newRecordingServer(t, 30)
	rj := &memJournal{}
	r, th := windowThread(t, ref, rj, window)
	if res := r.RunThread(context.Background(), &th); res.Status != event.Succeeded {
		t.Fatalf("reference: %s %s", res.Status, res.Error)
	}
	want := ref.requests()
	var firstElision int
	for i, e := range rj.of("t1") {
		if e.Kind == journal.KindElision {
			firstElision = i
			break
		}
	}
	if firstElision == 0 {
		t.Fatal("the reference thread elided nothing")
	}

	for _, tc := range []struct {
		name string
		// kill stops the first execution: its context is cancelled at
		// request killAt, or its journal is cut to its first cut entries.
		killAt, cut int
	}{
		{name: "killed at request 12", killAt: 12},
		{name: "killed at request 23", killAt: 23},
		{name: "journal ends with an elision", cut: firstElision + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRecordingServer(t, 30)
			j := &memJournal{}
			r, th := windowThread(t, srv, j, window)
			var replay []journal.Entry
			sent := 0
			if tc.killAt > 0 {
				ctx, cancel := context.WithCancel(context.Background())
				srv.hook = func(n int) {
					if n == tc.killAt {
						cancel()
					}
				}
				if res := r.RunThread(ctx, &th); res.Status != event.Cancelled {
					t.Fatalf("killed thread: %s %s", res.Status, res.Error)
				}
				cancel()
				srv.hook = nil
				replay = j.of("t1")
				sent = len(srv.requests())
			} else {
				replay = rj.of("t1")[:tc.cut]
				j.entries = map[string][]journal.Entry{"t1": append([]journal.Entry(nil), replay...)}
			}
			th.Replay = replay
			if res := r.RunThread(context.Background(), &th); res.Status != event.Succeeded || res.Output != "done" {
				t.Fatalf("resumed: %s %q %s", res.Status, res.Output, res.Error)
			}
			got := srv.requests()[sent:]
			if len(got) == 0 || len(got) >= len(want) {
				t.Fatalf("the resumed thread sent %d requests, the whole thread %d", len(got), len(want))
			}
			// The resumed thread's requests are the reference's last ones.
			tail := want[len(want)-len(got):]
			for i := range got {
				if !bytes.Equal(got[i], tail[i]) {
					t.Fatalf("resumed request %d differs from the reference's request %d:\n%s",
						i+1, len(want)-len(got)+i+1, cmp.Diff(messagesOf(t, tail[i]), messagesOf(t, got[i])))
				}
			}
			// And so is the transcript's conversation.
			a := journal.BuildTranscript("run", "t1", rj.of("t1"))
			b := journal.BuildTranscript("run", "t1", j.of("t1"))
			if diff := cmp.Diff(a.Messages, b.Messages); diff != "" {
				t.Errorf("transcript messages (-reference +resumed):\n%s", diff)
			}
		})
	}
}

// policyThread runs a thread of m under window with tool "big", which
// answers size bytes, and returns its result, the model's requests and its
// journal.
func policyThread(t *testing.T, m *fakeModel, window int64, size int, replay []journal.Entry, j *memJournal) thread.Result {
	t.Helper()
	big := &tools.Func{ToolName: "big", Desc: "prints a lot", Parameters: json.RawMessage(`{"type":"object"}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { return strings.Repeat("b", size), nil }}
	r, err := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Tools: []tools.Tool{big}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	th := thread.Thread{RunID: "run", ID: "t1", Path: "root", Name: "root", Task: "the task",
		Agent: spec.Agent{Name: "root", Instructions: "the system prompt", Tools: []string{"big"}, ContextWindow: window, Harness: spec.Harness{Tools: []string{}}},
		Cwd:   t.TempDir(), Replay: replay}
	return r.RunThread(context.Background(), &th)
}

// isSummaryRequest: the summary call offers no tools.
func isSummaryRequest(req model.Request) bool { return len(req.Tools) == 0 }

// turns answers with a call of big on each of the first n turns (each
// with text of textBytes), then "done"; a summary request gets "SUMMARY".
func turns(n, textBytes int) func(context.Context, model.Request) (model.Response, error) {
	return func(_ context.Context, req model.Request) (model.Response, error) {
		if isSummaryRequest(req) {
			return model.Response{Text: "SUMMARY", Usage: model.Usage{InputTokens: 100, OutputTokens: 5}}, nil
		}
		k := 0 // the last call's number and one: summaries keep the latest turn
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == model.RoleAssistant && len(m.ToolCalls) > 0 {
				k, _ = strconv.Atoi(strings.TrimPrefix(m.ToolCalls[0].ID, "c"))
				k++
				break
			}
		}
		if k >= n {
			return model.Response{Text: "done"}, nil
		}
		return model.Response{Text: strings.Repeat("t", textBytes), ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("c%d", k), Name: "big", Arguments: "{}"}}}, nil
	}
}

// checkShape: every request keeps the system prompt and the task, never
// touches its latest turn, and answers each tool call right after it.
func checkShape(t *testing.T, reqs []model.Request) {
	t.Helper()
	for i, req := range reqs {
		if isSummaryRequest(req) {
			continue
		}
		ms := req.Messages
		if ms[0].Role != model.RoleSystem || !strings.HasPrefix(ms[0].Content, "the system prompt") || !cmp.Equal(ms[1], model.Message{Role: model.RoleUser, Content: "the task"}) {
			t.Fatalf("request %d lost its system prompt or task: %+v", i, ms[:2])
		}
		last := lastTurn(ms)
		for k := last; k < len(ms); k++ {
			if journal.IsElided(ms[k].Content) {
				t.Errorf("request %d: the latest turn's message %d is elided", i, k)
			}
		}
		for k, m := range ms {
			if m.Role != model.RoleTool {
				continue
			}
			j := k - 1
			for j > 0 && ms[j].Role == model.RoleTool {
				j--
			}
			found := false
			for _, c := range ms[j].ToolCalls {
				found = found || c.ID == m.ToolCallID
			}
			if ms[j].Role != model.RoleAssistant || !found {
				t.Errorf("request %d: result %s at %d does not follow its call", i, m.ToolCallID, k)
			}
		}
	}
}

// Old tool results go first, oldest first, in one step from past 80% of
// the window to under 50%; the system prompt, the task and the latest turn
// stay.
func TestMakeRoomElidesOldestResultsFirst(t *testing.T) {
	const window = 4096 // tokens: about 16 KB, made room for past 13 KB
	m := &fakeModel{fn: turns(12, 0)}
	j := &memJournal{}
	res := policyThread(t, m, window, 2000, nil, j)
	if res.Status != event.Succeeded {
		t.Fatalf("thread: %s %s", res.Status, res.Error)
	}
	reqs := m.requests()
	checkShape(t, reqs)
	var first *journal.Entry
	for _, e := range j.of("t1") {
		if e.Kind == journal.KindSummary {
			t.Errorf("summary made; eliding was enough")
		}
		if e.Kind == journal.KindElision && first == nil {
			first = &e
		}
	}
	if first == nil {
		t.Fatal("nothing elided")
	}
	// The oldest results, in order, from the first: messages 3, 5, 7...
	for i, el := range first.Elided {
		if el.Index != 3+2*i || el.CallID != fmt.Sprintf("c%d", i) || el.Tool != "big" || el.Bytes != 2000 {
			t.Errorf("elided[%d] = %+v, want message %d, call c%d of big, 2000 bytes", i, el, 3+2*i, i)
		}
	}
	if first.TokensBefore <= window*8/10 || first.TokensAfter > window/2 || first.TokensAfter <= window/2-600 {
		t.Errorf("made room from %d to %d tokens; want from past 80%% to just under 50%% of %d", first.TokensBefore, first.TokensAfter, window)
	}
	// The request of that turn shows markers where the results were.
	req := reqs[first.Turn]
	for _, el := range first.Elided {
		if got, want := req.Messages[el.Index].Content, journal.ElisionMarker("big", el.CallID, 2000); got != want {
			t.Errorf("message %d is %.60q, want the marker %q", el.Index, got, want)
		}
	}
	if !strings.Contains(req.Messages[3].Content, "call big again") {
		t.Errorf("the marker does not say how to get the result again: %q", req.Messages[3].Content)
	}
}

// When eliding is not enough (the conversation's bulk is the model's own
// text), the oldest turns become one summary made by the thread's model;
// the summary is journaled and reused by a thread that runs again, which
// then sends the same requests.
func TestMakeRoomSummarizesWhenElidingIsNotEnough(t *testing.T) {
	const window = 4096
	m := &fakeModel{fn: turns(10, 2000)}
	j := &memJournal{}
	res := policyThread(t, m, window, 100, nil, j)
	if res.Status != event.Succeeded {
		t.Fatalf("thread: %s %s", res.Status, res.Error)
	}
	reqs := m.requests()
	checkShape(t, reqs)
	var summaries int
	var summary journal.Entry
	cut := 0
	for i, e := range j.of("t1") {
		if e.Kind == journal.KindSummary {
			if summaries == 0 {
				summary, cut = e, i+1
			}
			summaries++
		}
	}
	if summaries == 0 {
		t.Fatal("no summary")
	}
	if summary.Content != "SUMMARY" || summary.Summarized < 2 || summary.Usage.InputTokens != 100 || summary.TokensAfter > window/2 {
		t.Errorf("summary entry %+v", summary)
	}
	// The request after it: system, task, the summary, then whole turns.
	var after model.Request
	for i, req := range reqs {
		if isSummaryRequest(req) {
			after = reqs[i+1]
			if !strings.Contains(req.Messages[1].Content, "the task") || req.Messages[0].Content != summaryPrompt {
				t.Errorf("summary request: %+v", req.Messages[:1])
			}
			break
		}
	}
	if got := after.Messages[2]; !cmp.Equal(got, journal.SummaryMessage(summary.Summarized, "SUMMARY")) || after.Messages[3].Role != model.RoleAssistant {
		t.Errorf("after the task: %+v, then %s", got, after.Messages[3].Role)
	}
	if want := int64(100 * summaries); res.Usage.InputTokens != want {
		t.Errorf("usage %+v, want the summaries' %d input tokens counted", res.Usage, want)
	}

	// Run again from a journal that ends with the summary: the summary
	// is reused, and the requests are those of the first run.
	again := &fakeModel{fn: turns(10, 2000)}
	j2 := &memJournal{entries: map[string][]journal.Entry{"t1": j.of("t1")[:cut]}}
	if res := policyThread(t, again, window, 100, j.of("t1")[:cut], j2); res.Status != event.Succeeded {
		t.Fatalf("again: %s %s", res.Status, res.Error)
	}
	got := again.requests()
	if diff := cmp.Diff(reqs[len(reqs)-len(got):], got); diff != "" {
		t.Errorf("requests of the thread run again (-first run +again):\n%s", diff)
	}
	if diff := cmp.Diff(journal.BuildTranscript("run", "t1", j.of("t1")).Messages, journal.BuildTranscript("run", "t1", j2.of("t1")).Messages); diff != "" {
		t.Errorf("transcripts (-first +again):\n%s", diff)
	}
}

// A message larger than the whole window fails the thread with a clear
// error, before any request is sent with it.
func TestMakeRoomMessageLargerThanTheWindow(t *testing.T) {
	t.Run("task", func(t *testing.T) {
		m := &fakeModel{fn: turns(1, 0)}
		big := &tools.Func{ToolName: "big", Desc: "x", Parameters: json.RawMessage(`{"type":"object"}`),
			Fn: func(context.Context, json.RawMessage) (string, error) { return "", nil }}
		r, err := newInProcess(Config{Models: models{"fake:root": m}, DefaultModel: "fake:root", Tools: []tools.Tool{big}})
		if err != nil {
			t.Fatal(err)
		}
		th := thread.Thread{RunID: "run", ID: "t1", Path: "root", Name: "root", Task: strings.Repeat("x", 20000),
			Agent: spec.Agent{Name: "root", ContextWindow: 4096}, Cwd: t.TempDir()}
		res := r.RunThread(context.Background(), &th)
		if res.Status != event.Failed || !strings.Contains(res.Error, "context window exceeded: the task is about 500") ||
			!strings.Contains(res.Error, "tokens, more than the model's whole context window (4096 tokens); nothing was sent") {
			t.Errorf("thread: %s %q", res.Status, res.Error)
		}
		if n := len(m.requests()); n != 0 {
			t.Errorf("%d requests sent", n)
		}
	})
	t.Run("tool result", func(t *testing.T) {
		m := &fakeModel{fn: turns(3, 0)}
		res := policyThread(t, m, 4096, 20000, nil, &memJournal{})
		if res.Status != event.Failed || !strings.Contains(res.Error, "context window exceeded: the result of big call c0 is about") {
			t.Errorf("thread: %s %q", res.Status, res.Error)
		}
		if n := len(m.requests()); n != 1 {
			t.Errorf("%d requests sent, want 1 (none with the result)", n)
		}
	})
}
