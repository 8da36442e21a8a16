package api

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
)

func TestResumeRun(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	h.fake.addRun("failed", event.Failed)
	h.fake.addRun("ok", event.Succeeded)

	r := h.do("POST", "/v1/runs/failed/resume", nil)
	if r.status != http.StatusAccepted || r.header.Get("Location") != "/v1/runs/failed" {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if got := decode[ResumeResponse](t, r); got != (ResumeResponse{RunID: "failed", Status: "queued"}) {
		t.Errorf("resume answered %+v", got)
	}
	if h.fake.runs["failed"].Status != record.Queued {
		t.Errorf("the run was not queued again")
	}
	if status, code, _ := errorOf(t, h.do("POST", "/v1/runs/ok/resume", nil)); status != http.StatusConflict || code != "conflict" {
		t.Errorf("resume of a run that succeeded: %d %s, want 409", status, code)
	}
	if status, _, _ := errorOf(t, h.do("POST", "/v1/runs/nope/resume", nil)); status != http.StatusNotFound {
		t.Errorf("resume of an unknown run: %d, want 404", status)
	}
}

func TestThreadsAndTranscript(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	h.fake.addRun("r1", event.Succeeded)
	threads := []ThreadSummary{{ID: "t1", Name: "formica", Path: "formica", Status: event.Succeeded},
		{ID: "t2", ParentID: "t1", Name: "research", Path: "formica/research", Depth: 1, Status: event.Succeeded}}
	h.fake.threads = map[string][]ThreadSummary{"r1": threads}
	tr := Transcript{RunID: "r1", ThreadID: "t2", Name: "research", Path: "formica/research", Depth: 1, Status: event.Succeeded,
		Messages: []model.Message{{Role: model.RoleSystem, Content: "S"}, {Role: model.RoleUser, Content: "T"}}}
	h.fake.transcripts = map[string]Transcript{"r1/t2": tr}

	if diff := cmp.Diff(threads, decode[[]ThreadSummary](t, h.do("GET", "/v1/runs/r1/threads", nil))); diff != "" {
		t.Errorf("threads (-want +got):\n%s", diff)
	}
	got := decode[Transcript](t, h.do("GET", "/v1/runs/r1/threads/t2", nil))
	if diff := cmp.Diff(tr.Messages, got.Messages); diff != "" || got.Path != tr.Path {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	for _, path := range []string{"/v1/runs/r1/threads/t9", "/v1/runs/nope/threads", "/v1/runs/r1/threads/bad.id"} {
		if status, _, _ := errorOf(t, h.do("GET", path, nil)); status != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, status)
		}
	}
	h.fake.addRun("empty", event.Running)
	if r := h.do("GET", "/v1/runs/empty/threads", nil); r.status != 200 || string(r.body) != "[]\n" {
		t.Errorf("no threads yet: %d %q, want []", r.status, r.body)
	}
}
