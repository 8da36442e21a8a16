package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/wire"
	"github.com/google/go-cmp/cmp"
)

func TestApprovals(t *testing.T) {
	h := newHarness(t, Config{})
	if r := h.do("GET", "/v1/approvals", nil); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("none pending: %d %s, want 200 []", r.status, r.body)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ap := Approval{ID: "ap1", RunID: "r1", ThreadID: "t1", ThreadPath: "root/helper", Tool: "bash",
		Arguments: `{"command":"rm -rf build"}`, RequestedAt: at}
	h.fake.approvals["ap1"] = ap
	h.fake.approvals["ap2"] = Approval{ID: "ap2", RunID: "r1"}

	r := h.do("GET", "/v1/approvals", nil)
	got := decode[[]Approval](t, r)
	if len(got) != 2 {
		t.Fatalf("pending = %+v, want 2", got)
	}
	if got[0].ID != "ap1" {
		got[0], got[1] = got[1], got[0]
	}
	if diff := cmp.Diff(ap, got[0]); diff != "" {
		t.Errorf("approval (-want +got):\n%s", diff)
	}

	r = h.do("POST", "/v1/approvals/ap1", `{"decision": "allow"}`)
	if r.status != 200 {
		t.Fatalf("decide: %d %s", r.status, r.body)
	}
	if diff := cmp.Diff(DecideResponse{ID: "ap1", Decision: "allow"}, decode[DecideResponse](t, r)); diff != "" {
		t.Errorf("decide (-want +got):\n%s", diff)
	}
	if r := h.do("POST", "/v1/approvals/ap2", `{"decision": "deny"}`); r.status != 200 {
		t.Errorf("deny: %d %s", r.status, r.body)
	}

	tests := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"already decided", "/v1/approvals/ap1", `{"decision": "deny"}`, 409, "conflict"},
		{"unknown", "/v1/approvals/nope", `{"decision": "deny"}`, 404, "not_found"},
		{"malformed id", "/v1/approvals/a.b", `{"decision": "deny"}`, 404, "not_found"},
		{"bad decision", "/v1/approvals/ap1", `{"decision": "maybe"}`, 400, "bad_request"},
		{"no decision", "/v1/approvals/ap1", `{}`, 400, "bad_request"},
		{"unknown field", "/v1/approvals/ap1", `{"decision": "allow", "why": "ok"}`, 400, "bad_request"},
		{"wrong method", "/v1/approvals/ap1", "", 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.status == 405 {
				method = "PUT"
			}
			if status, code, msg := errorOf(t, h.do(method, tt.path, tt.body)); status != tt.status || code != tt.code {
				t.Errorf("got %d %s (%s), want %d %s", status, code, msg, tt.status, tt.code)
			}
		})
	}
}

func TestWorkers(t *testing.T) {
	h := newHarness(t, Config{})
	if r := h.do("GET", "/v1/workers", nil); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("no workers: %d %s, want 200 []", r.status, r.body)
	}
	want := []wire.WorkerInfo{{ID: "w1", Host: "box", Slots: 4, Running: 1, Placed: 1,
		LastSeen: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}}
	h.fake.workers = want
	if diff := cmp.Diff(want, decode[[]wire.WorkerInfo](t, h.do("GET", "/v1/workers", nil))); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
	h.fake.fail = errors.New("boom")
	if status, code, msg := errorOf(t, h.do("GET", "/v1/workers", nil)); status != 500 || code != "internal" || msg != "internal error" {
		t.Errorf("failing backend: got %d %s %q", status, code, msg)
	}
}

func TestAssets(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	want := wire.Assets{Streams: 11, Consumers: 2, Kinds: []wire.AssetKind{{Kind: "queue", Streams: 1, Consumers: 1, Names: []string{"FORMICA_QUEUE"}}},
		CountedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.fake.assets = want
	if diff := cmp.Diff(want, decode[wire.Assets](t, h.do("GET", "/v1/assets", nil))); diff != "" {
		t.Errorf("assets (-want +got):\n%s", diff)
	}
	h.fake.fail = fmt.Errorf("no coordinator: %w", ErrUnavailable)
	if status, code, _ := errorOf(t, h.do("GET", "/v1/assets", nil)); status != 503 || code != "unavailable" {
		t.Errorf("no coordinator: got %d %s", status, code)
	}
	h.token = ""
	if status, _, _ := errorOf(t, h.do("GET", "/v1/assets", nil)); status != 401 {
		t.Errorf("no token: got %d", status)
	}
}

func TestProbes(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	h.token = "" // the probes need none
	h.fake.fail = errors.New("everything else is broken")
	r := h.do("GET", "/healthz", nil)
	if r.status != 200 {
		t.Errorf("healthz: %d %s", r.status, r.body)
	}
	if diff := cmp.Diff(Status{Status: "ok"}, decode[Status](t, r)); diff != "" {
		t.Errorf("healthz (-want +got):\n%s", diff)
	}
	r = h.do("GET", "/readyz", nil)
	if diff := cmp.Diff(Status{Status: "ready"}, decode[Status](t, r)); r.status != 200 || diff != "" {
		t.Errorf("readyz: %d (-want +got):\n%s", r.status, diff)
	}
	h.fake.mu.Lock()
	h.fake.readyErr = errors.New("jetstream not available")
	h.fake.mu.Unlock()
	status, code, msg := errorOf(t, h.do("GET", "/readyz", nil))
	if status != http.StatusServiceUnavailable || code != "unavailable" || msg != "jetstream not available" {
		t.Errorf("not ready: got %d %s %q", status, code, msg)
	}
	if r := h.do("GET", "/healthz", nil); r.status != 200 {
		t.Errorf("healthz while not ready: %d", r.status)
	}
}
