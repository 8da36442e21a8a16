package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/formica-run/formica/client"
	"github.com/formica-run/formica/internal/apitest"
)

// start starts a cluster behind its API and a client of it; every call of
// the test is bounded by the returned context.
func start(t *testing.T) (*apitest.Cluster, *client.Client, context.Context) {
	t.Helper()
	cl := apitest.Start(t)
	c, err := client.New(cl.URL, apitest.Token)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return cl, c, ctx
}

// apiStatus is the HTTP status of an *APIError, or 0.
func apiStatus(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

// heldApproval is the error an Events callback stops at when the run
// asks for an approval.
var heldApproval = errors.New("approval requested")

func TestRunSubmittedFollowedAndRead(t *testing.T) {
	t.Parallel()
	_, c, ctx := start(t)
	model := apitest.Script(t, "responses:\n  - text: all done\n")
	id, err := c.Submit(ctx, client.SubmitRequest{ID: "first", Task: "say it", Model: model})
	if err != nil || id != "first" {
		t.Fatalf("Submit = %q, %v", id, err)
	}

	var types []client.EventType
	var last uint64
	err = c.Events(ctx, id, 0, func(seq uint64, e client.Event) error {
		if seq <= last {
			t.Errorf("event id %d after %d", seq, last)
		}
		last = seq
		types = append(types, e.Type)
		return nil
	})
	if err != nil || len(types) == 0 || types[len(types)-1] != client.RunFinished {
		t.Fatalf("Events = %v, types %v", err, types)
	}
	r, err := c.Wait(ctx, id)
	if err != nil || r.Status != client.Succeeded || r.Output != "all done" {
		t.Fatalf("Wait = %+v, %v", r, err)
	}
	// Resumed after its end, a finished run's stream has nothing more.
	// (Asked before its record is final, just after its run.finished, the
	// coordinator would follow it for events that never come.)
	if err := c.Events(ctx, id, last, func(uint64, client.Event) error {
		return errors.New("an event after the last")
	}); err != nil {
		t.Errorf("Events after the last = %v", err)
	}
	if r, err := c.GetRun(ctx, id); err != nil || r.RunID != id || r.Task != "say it" || r.Totals == nil {
		t.Errorf("GetRun = %+v, %v", r, err)
	}

	threads, err := c.Threads(ctx, id)
	if err != nil || len(threads) != 1 || threads[0].Status != client.Succeeded {
		t.Fatalf("Threads = %+v, %v", threads, err)
	}
	tr, err := c.Transcript(ctx, id, threads[0].ID)
	if err != nil || tr.ThreadID != threads[0].ID || len(tr.Entries) == 0 {
		t.Errorf("Transcript = %+v, %v", tr, err)
	}

	// The same id again is the same run.
	if again, err := c.Submit(ctx, client.SubmitRequest{ID: "first", Task: "say it", Model: model}); err != nil || again != id {
		t.Errorf("Submit again = %q, %v", again, err)
	}
}

func TestListRunsPages(t *testing.T) {
	t.Parallel()
	_, c, ctx := start(t)
	model := apitest.Script(t, "responses:\n  - text: ok\n")
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.Submit(ctx, client.SubmitRequest{ID: id, Task: "t " + id, Model: model}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	page := ""
	for range 3 {
		runs, next, err := c.ListRuns(ctx, client.ListOptions{Status: client.Succeeded, Limit: 2, Page: page})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			seen = append(seen, r.RunID)
		}
		if page = next; page == "" {
			break
		}
	}
	if !slices.Equal(seen, []string{"c", "b", "a"}) {
		t.Errorf("listed %v, want c, b, a (newest first)", seen)
	}
	if runs, _, err := c.ListRuns(ctx, client.ListOptions{Status: client.Running}); err != nil || len(runs) != 0 {
		t.Errorf("ListRuns(running) = %v, %v", runs, err)
	}
	if _, _, err := c.ListRuns(ctx, client.ListOptions{Status: "bogus"}); apiStatus(err) != http.StatusBadRequest {
		t.Errorf("ListRuns(bogus) = %v, want a 400", err)
	}
}

// slowAgent is an agent whose every model call takes a minute, unless
// its run is cancelled first.
const slowAgent = `{"name": "slow", "model": "sim", "model_args": {"latency_ms": 60000}}`

// cancelOnStart follows run id's events after the event id after, cancels
// the run once its root has started, and returns the id of its
// run.finished, which it checks says cancelled.
func cancelOnStart(t *testing.T, ctx context.Context, c *client.Client, id string, after uint64) uint64 {
	t.Helper()
	var ended client.Event
	err := c.Events(ctx, id, after, func(seq uint64, e client.Event) error {
		after, ended = seq, e
		if e.Type == "thread.started" {
			return c.CancelRun(ctx, id)
		}
		return nil
	})
	if err != nil || ended.Type != client.RunFinished || ended.Status != client.Cancelled {
		t.Fatalf("Events = %v, ending with %+v; want the run cancelled", err, ended)
	}
	return after
}

func TestCancelResume(t *testing.T) {
	t.Parallel()
	_, c, ctx := start(t)
	id, err := c.Submit(ctx, client.SubmitRequest{Task: "take long", Agent: json.RawMessage(slowAgent)})
	if err != nil {
		t.Fatal(err)
	}
	after := cancelOnStart(t, ctx, c, id, 0)
	r, err := c.Wait(ctx, id)
	if err != nil || r.Status != client.Cancelled {
		t.Fatalf("Wait after cancel = %+v, %v", r, err)
	}
	if err := c.CancelRun(ctx, id); apiStatus(err) != http.StatusConflict {
		t.Errorf("CancelRun(finished) = %v, want a 409", err)
	}
	if err := c.CancelThread(ctx, id, r.Threads[0].ID); apiStatus(err) != http.StatusConflict {
		t.Errorf("CancelThread(finished run) = %v, want a 409", err)
	}

	// Resumed, its new execution's events come after the first one's.
	if err := c.ResumeRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.ResumeRun(ctx, id); apiStatus(err) != http.StatusConflict {
		t.Errorf("ResumeRun(queued) = %v, want a 409", err)
	}
	cancelOnStart(t, ctx, c, id, after)
	r, err = c.Wait(ctx, id)
	if err != nil || r.Status != client.Cancelled || r.Resumes != 1 {
		t.Fatalf("Wait after resume = %+v, %v", r, err)
	}
}

func TestApprovals(t *testing.T) {
	t.Parallel()
	_, c, ctx := start(t)
	model := apitest.Script(t, `responses:
  - tool_calls: [{name: write_file, arguments: '{"path":"out.txt","content":"held"}'}]
  - text: root finished
`)
	id, err := c.Submit(ctx, client.SubmitRequest{Task: "write it", Model: model})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Events(ctx, id, 0, func(_ uint64, e client.Event) error {
		if e.Type == "approval.requested" {
			return heldApproval
		}
		return nil
	})
	if !errors.Is(err, heldApproval) {
		t.Fatalf("Events = %v, want the run held on an approval", err)
	}
	as, err := c.ListApprovals(ctx)
	if err != nil || len(as) != 1 || as[0].RunID != id || as[0].Tool != "write_file" {
		t.Fatalf("ListApprovals = %+v, %v", as, err)
	}
	if err := c.Decide(ctx, as[0].ID, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(ctx, as[0].ID, true); apiStatus(err) != http.StatusConflict && apiStatus(err) != http.StatusNotFound {
		t.Errorf("Decide again = %v, want a 409 or 404", err)
	}
	r, err := c.Wait(ctx, id)
	if err != nil || r.Status != client.Succeeded || r.Output != "root finished" {
		t.Fatalf("Wait after the approval = %+v, %v", r, err)
	}
}

func TestErrorsAndCluster(t *testing.T) {
	t.Parallel()
	cl, c, ctx := start(t)
	_, err := c.GetRun(ctx, "no-such-run")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Code != "not_found" || ae.Message == "" {
		t.Errorf("GetRun(unknown) = %v, want a 404 not_found", err)
	}
	if err := c.Events(ctx, "no-such-run", 0, func(uint64, client.Event) error { return nil }); apiStatus(err) != http.StatusNotFound {
		t.Errorf("Events(unknown) = %v, want a 404", err)
	}
	if _, err := c.Submit(ctx, client.SubmitRequest{Task: " "}); apiStatus(err) != http.StatusBadRequest {
		t.Errorf("Submit(no task) = %v, want a 400", err)
	}

	wrong, err := client.New(cl.URL, "wrong-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Workers(ctx); apiStatus(err) != http.StatusUnauthorized {
		t.Errorf("Workers with a wrong token = %v, want a 401", err)
	}

	ws, err := c.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].Slots != 4 {
		t.Errorf("Workers = %+v, %v", ws, err)
	}
	a, err := c.Assets(ctx)
	if err != nil || a.Streams == 0 || len(a.Kinds) == 0 {
		t.Errorf("Assets = %+v, %v", a, err)
	}

	for _, base := range []string{"", "ftp://x", "http://", "127.0.0.1:8080"} {
		if _, err := client.New(base, ""); !errors.Is(err, client.ErrConfig) {
			t.Errorf("New(%q) = %v, want ErrConfig", base, err)
		}
	}
}

// TestCancelThread: a helper held on an approval is cancelled alone; its
// parent hears it failed and finishes.
func TestCancelThread(t *testing.T) {
	t.Parallel()
	_, c, ctx := start(t)
	model := apitest.Script(t, `responses:
  - when: "root task"
    tool_calls: [{name: agent, arguments: {name: helper, task: "helper job"}}]
  - when: "root task"
    text: root done
  - when: "helper job"
    tool_calls: [{name: write_file, arguments: '{"path":"out.txt","content":"held"}'}]
`)
	id, err := c.Submit(ctx, client.SubmitRequest{Task: "root task", Model: model})
	if err != nil {
		t.Fatal(err)
	}
	var helper string
	err = c.Events(ctx, id, 0, func(_ uint64, e client.Event) error {
		if e.Type == "approval.requested" {
			helper = e.ThreadID
			return heldApproval
		}
		return nil
	})
	if !errors.Is(err, heldApproval) || helper == "" {
		t.Fatalf("Events = %v, want the helper held on an approval", err)
	}
	if err := c.CancelThread(ctx, id, helper); err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx, id)
	if err != nil || r.Status != client.Succeeded || r.Output != "root done" {
		t.Fatalf("Wait = %+v, %v", r, err)
	}
	var st client.Status
	for _, th := range r.Threads {
		if th.ID == helper {
			st = th.Status
		}
	}
	// Cancelled, also when the cancel ended its wait for the approval
	// before it reached the worker (the helper then asked its model again,
	// whose script has no answer left).
	if st != client.Cancelled {
		t.Errorf("the helper ended %q, want cancelled", st)
	}
}
