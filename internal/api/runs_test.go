package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
)

func TestSubmit(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.do("POST", "/v1/runs", `{"task": "write a poem"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	if diff := cmp.Diff(SubmitResponse{RunID: "run-1"}, decode[SubmitResponse](t, r)); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if got := r.header.Get("Location"); got != "/v1/runs/run-1" {
		t.Errorf("Location = %q", got)
	}

	full := `{"task": "plan", "model": "sim", "id": "my_run-1", "agent_max_depth": 2, "agent_max_threads": 8, "budget": {"usd": 1.5, "tokens": 10},
		"agent": {"name": "lead", "instructions": "be brief \/ kind \u00e9 \ud83d\ude00", "tools": ["agent"],
		"handoffs": ["critic"], "agents": [{"name": "critic"}]}}`
	for range 2 { // the same id twice is the same run
		r = h.do("POST", "/v1/runs", full)
		if r.status != http.StatusAccepted {
			t.Fatalf("status %d, body %s", r.status, r.body)
		}
		if got := decode[SubmitResponse](t, r).RunID; got != "my_run-1" {
			t.Errorf("run id = %q, want my_run-1", got)
		}
	}
	lead := spec.Agent{Name: "lead", Instructions: "be brief / kind é 😀", Tools: []string{"agent"}, Handoffs: []string{"critic"}}
	want := SubmitRequest{Task: "plan", Model: "sim", ID: "my_run-1", MaxDepth: 2, MaxThreads: 8, Agent: &lead, Budget: limits.Budget{USD: 1.5, Tokens: 10},
		Agents: map[string]spec.Agent{"lead": lead, "critic": {Name: "critic"}}}
	h.fake.mu.Lock()
	got := h.fake.submitted
	h.fake.mu.Unlock()
	if diff := cmp.Diff([]SubmitRequest{{Task: "write a poem"}, want, want}, got); diff != "" {
		t.Errorf("submitted (-want +got):\n%s", diff)
	}
}

func TestSubmitErrors(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		fail    error
		status  int
		code    string
		message string // a part of the message
	}{
		{"empty body", ``, nil, 400, "bad_request", "body is empty"},
		{"no task", `{}`, nil, 400, "bad_request", "task is required"},
		{"blank task", `{"task": " \n"}`, nil, 400, "bad_request", "task is required"},
		{"null body", `null`, nil, 400, "bad_request", "task is required"},
		{"array body", `[]`, nil, 400, "bad_request", "must be a JSON object"},
		{"malformed", `{"task": `, nil, 400, "bad_request", "ends in the middle"},
		{"syntax", `{"task" "x"}`, nil, 400, "bad_request", "malformed JSON"},
		{"trailing data", `{"task": "x"} {}`, nil, 400, "bad_request", "nothing after it"},
		{"unknown field", `{"task": "x", "priority": 1}`, nil, 400, "bad_request", `unknown field "priority"`},
		{"wrong type", `{"task": "x", "agent_max_depth": "2"}`, nil, 400, "bad_request", `"agent_max_depth" must be an integer, not string`},
		{"id with dot", `{"task": "x", "id": "a.b"}`, nil, 400, "bad_request", "want 1 to 64 letters"},
		{"id with space", `{"task": "x", "id": "a b"}`, nil, 400, "bad_request", "want 1 to 64 letters"},
		{"id too long", `{"task": "x", "id": "` + strings.Repeat("a", 65) + `"}`, nil, 400, "bad_request", "want 1 to 64 letters"},
		{"agent without name", `{"task": "x", "agent": {"instructions": "hi"}}`, nil, 400, "bad_request", "agent: name: required"},
		{"agent unknown key", `{"task": "x", "agent": {"name": "a", "harnes": {}}}`, nil, 400, "bad_request", `agent:1: unknown key "harnes"`},
		{"agent not an object", `{"task": "x", "agent": "lead"}`, nil, 400, "bad_request", "agent:1: a spec must be a mapping"},
		{"agent bad handoff", `{"task": "x", "agent": {"name": "a", "handoffs": ["b"]}}`, nil, 400, "bad_request", "agent: handoffs[0]"},
		{"negative usd budget", `{"task": "x", "budget": {"usd": -1}}`, nil, 400, "bad_request", "budget amounts must not be negative"},
		{"backend invalid", `{"task": "x"}`, fmt.Errorf("no such model: %w", ErrInvalid), 400, "bad_request", "no such model"},
		{"backend unavailable", `{"task": "x"}`, fmt.Errorf("jetstream: %w", ErrUnavailable), 503, "unavailable", "jetstream"},
		{"backend broken", `{"task": "x"}`, errors.New("secret detail"), 500, "internal", "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.fake.fail = tt.fail
			status, code, msg := errorOf(t, h.do("POST", "/v1/runs", tt.body))
			if status != tt.status || code != tt.code || !strings.Contains(msg, tt.message) {
				t.Errorf("got %d %s %q, want %d %s with %q", status, code, msg, tt.status, tt.code, tt.message)
			}
			if tt.fail == nil && len(h.fake.submitted) > 0 {
				t.Errorf("submitted %+v", h.fake.submitted)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	h := newHarness(t, Config{MaxBody: 1024})
	big := `{"task": "` + strings.Repeat("x", 2000) + `"}`
	status, code, _ := errorOf(t, h.do("POST", "/v1/runs", big))
	if status != http.StatusRequestEntityTooLarge || code != "too_large" {
		t.Errorf("with Content-Length: got %d %s, want 413 too_large", status, code)
	}
	// Without a Content-Length the limit still holds, while reading.
	status, code, _ = errorOf(t, h.do("POST", "/v1/runs", io.MultiReader(strings.NewReader(big))))
	if status != http.StatusRequestEntityTooLarge || code != "too_large" {
		t.Errorf("chunked: got %d %s, want 413 too_large", status, code)
	}
	if r := h.do("POST", "/v1/runs", `{"task": "small"}`); r.status != http.StatusAccepted {
		t.Errorf("small body: status %d", r.status)
	}
}

func TestListRuns(t *testing.T) {
	h := newHarness(t, Config{})
	if r := h.do("GET", "/v1/runs", nil); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("no runs: %d %s, want 200 []", r.status, r.body)
	}
	h.fake.addRun("a", event.Succeeded)
	h.fake.addRun("b", event.Running)
	h.fake.addRun("c", event.Succeeded)
	tests := []struct {
		query string
		want  []string
		args  listArgs
	}{
		{"", []string{"c", "b", "a"}, listArgs{"", 50}},
		{"?status=succeeded", []string{"c", "a"}, listArgs{"succeeded", 50}},
		{"?limit=1", []string{"c"}, listArgs{"", 1}},
		{"?limit=5000&status=running", []string{"b"}, listArgs{"running", 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := h.do("GET", "/v1/runs"+tt.query, nil)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var ids []string
			for _, run := range decode[[]record.Run](t, r) {
				ids = append(ids, run.RunID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			h.fake.mu.Lock()
			last := h.fake.listArgs[len(h.fake.listArgs)-1]
			h.fake.mu.Unlock()
			if diff := cmp.Diff(tt.args, last); diff != "" {
				t.Errorf("backend args (-want +got):\n%s", diff)
			}
		})
	}
	for _, q := range []string{"?limit=0", "?limit=-3", "?limit=ten", "?status=done"} {
		if status, code, _ := errorOf(t, h.do("GET", "/v1/runs"+q, nil)); status != 400 || code != "bad_request" {
			t.Errorf("%s: got %d %s, want 400 bad_request", q, status, code)
		}
	}
}

func TestGetRun(t *testing.T) {
	h := newHarness(t, Config{})
	h.fake.addRun("r1", event.Succeeded)
	h.fake.runs["r1"] = record.Run{RunID: "r1", Status: event.Succeeded, Task: "task of r1",
		Threads:  []record.Thread{{ID: "a", Status: event.Succeeded}, {ID: "b", Status: event.Cancelled}, {ID: "c", Status: event.Failed}},
		Refusals: record.Refusals{Depth: 1, Budget: 2}, Usage: model.Usage{InputTokens: 10, OutputTokens: 5}}
	r := h.do("GET", "/v1/runs/r1", nil)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	want := h.fake.runs["r1"]
	want.Totals = &record.Totals{Done: 1, Cancelled: 1, Failed: 1, Refused: 3, InputTokens: 10, OutputTokens: 5}
	if diff := cmp.Diff(want, decode[record.Run](t, r)); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	for _, path := range []string{"/v1/runs/nope", "/v1/runs/a.b", "/v1/runs/" + strings.Repeat("x", 65)} {
		if status, code, _ := errorOf(t, h.do("GET", path, nil)); status != 404 || code != "not_found" {
			t.Errorf("%s: got %d %s, want 404 not_found", path, status, code)
		}
	}
}

func TestCancelRun(t *testing.T) {
	h := newHarness(t, Config{})
	h.fake.addRun("live", event.Running)
	h.fake.addRun("done", event.Succeeded)
	r := h.do("POST", "/v1/runs/live/cancel", nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if diff := cmp.Diff(CancelResponse{RunID: "live", Status: "cancelling"}, decode[CancelResponse](t, r)); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	tests := []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/runs/nope/cancel", 404, "not_found"},
		{"/v1/runs/done/cancel", 409, "conflict"},
	}
	for _, tt := range tests {
		if status, code, _ := errorOf(t, h.do("POST", tt.path, nil)); status != tt.status || code != tt.code {
			t.Errorf("%s: got %d %s, want %d %s", tt.path, status, code, tt.status, tt.code)
		}
	}
}

func TestCancelThread(t *testing.T) {
	h := newHarness(t, Config{})
	h.fake.addRun("live", event.Running)
	h.fake.addRun("done", event.Succeeded)
	for _, tt := range []struct {
		path string
		want int
	}{
		{"/v1/runs/live/threads/t1/cancel", http.StatusAccepted},
		{"/v1/runs/live/threads/unknown/cancel", http.StatusNotFound},
		{"/v1/runs/done/threads/t1/cancel", http.StatusConflict},
		{"/v1/runs/nope/threads/t1/cancel", http.StatusNotFound},
		{"/v1/runs/live/threads/a.b/cancel", http.StatusNotFound},
	} {
		if r := h.do("POST", tt.path, nil); r.status != tt.want {
			t.Errorf("POST %s: %d %s, want %d", tt.path, r.status, r.body, tt.want)
		}
	}
	r := h.do("POST", "/v1/runs/live/threads/t1/cancel", nil)
	var got ThreadCancelResponse
	if err := json.Unmarshal(r.body, &got); err != nil || got != (ThreadCancelResponse{RunID: "live", ThreadID: "t1", Status: "cancelling"}) {
		t.Errorf("answer %s (%v)", r.body, err)
	}
}
