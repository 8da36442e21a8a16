package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/metrics"
)

// statusCase is one request to a server under test and the status it must
// get; route names the operation ("GET /v1/runs/{id}") whose documented
// responses must list that status.
type statusCase struct {
	route   string
	why     string
	path    string // default: the route's path with r1 for {id}, t1 for {thread}
	method  string // default: the route's
	cfg     *Config
	setup   func(f *fakeBackend)
	body    any
	header  []string
	noToken bool
	want    int
}

// okBody is a valid body for the routes that take one.
var okBody = map[string]any{
	"POST /v1/runs":           map[string]any{"task": "t"},
	"POST /v1/approvals/{id}": map[string]any{"decision": "allow"},
}

// routesOffBackend are the routes that ask nothing of the Backend, so a
// failing backend changes nothing for them.
var routesOffBackend = []string{"GET /v1/openapi.json", "GET /healthz", "GET /readyz", "GET /metrics"}

// TestOpenAPIStatuses holds the document's responses to what the handlers
// answer: each case triggers a status on a real server and the document
// must list it for that operation, and every status the document lists
// for an operation must be triggered by some case.
func TestOpenAPIStatuses(t *testing.T) {
	doc := served(t)
	s, _ := New(Config{}, newFake())
	var cases []statusCase
	for _, rt := range s.routes() {
		key := rt.method + " " + rt.path
		// Statuses every route answers the same way.
		cases = append(cases,
			statusCase{route: key, why: "another method", method: http.MethodDelete, want: http.StatusMethodNotAllowed},
			statusCase{route: key, why: "no token, not a loopback host", cfg: &Config{}, header: []string{"Host", "example.com"},
				body: okBody[key], want: http.StatusForbidden})
		if !rt.public {
			cases = append(cases, statusCase{route: key, why: "no token", noToken: true, body: okBody[key], want: http.StatusUnauthorized})
		}
		if !slices.Contains(routesOffBackend, key) {
			cases = append(cases,
				statusCase{route: key, why: "backend fault", body: okBody[key], want: http.StatusInternalServerError,
					setup: func(f *fakeBackend) { f.fail = errors.New("disk on fire") }},
				statusCase{route: key, why: "backend unavailable", body: okBody[key], want: http.StatusServiceUnavailable,
					setup: func(f *fakeBackend) { f.fail = Errorf(ErrUnavailable, "nats is down") }})
		}
	}
	running := func(f *fakeBackend) { f.addRun("r1", event.Running) }
	succeeded := func(f *fakeBackend) { f.addRun("r1", event.Succeeded) }
	finishedWithEvents := func(f *fakeBackend) { f.addRun("r1", event.Succeeded, testEvents("r1", 1, 2)...) }
	approval := func(decided bool) func(f *fakeBackend) {
		return func(f *fakeBackend) {
			f.approvals["a1"] = Approval{ID: "a1", RunID: "r1", ThreadID: "t1", Tool: "bash"}
			f.decided["a1"] = decided
		}
	}
	small := &Config{Token: testToken, MaxBody: 64}
	big := strings.Repeat("x", 100)
	cases = append(cases, []statusCase{
		{route: "POST /v1/runs", why: "submitted", body: okBody["POST /v1/runs"], want: http.StatusAccepted},
		{route: "POST /v1/runs", why: "no task", body: map[string]any{"task": ""}, want: http.StatusBadRequest},
		{route: "POST /v1/runs", why: "id of another run", setup: succeeded, body: map[string]any{"task": "other", "id": "r1"}, want: http.StatusConflict},
		{route: "POST /v1/runs", why: "too large", cfg: small, body: map[string]any{"task": big}, want: http.StatusRequestEntityTooLarge},
		{route: "GET /v1/runs", why: "listed", want: http.StatusOK},
		{route: "GET /v1/runs", why: "bad limit", path: "/v1/runs?limit=many", want: http.StatusBadRequest},
		{route: "GET /v1/runs/{id}", why: "found", setup: running, want: http.StatusOK},
		{route: "GET /v1/runs/{id}", why: "unknown", want: http.StatusNotFound},
		{route: "GET /v1/runs/{id}/events", why: "streamed", setup: finishedWithEvents, want: http.StatusOK},
		{route: "GET /v1/runs/{id}/events", why: "nothing after the resume point", setup: finishedWithEvents,
			path: "/v1/runs/r1/events?after=2", want: http.StatusNoContent},
		{route: "GET /v1/runs/{id}/events", why: "bad resume point", setup: finishedWithEvents, path: "/v1/runs/r1/events?after=x", want: http.StatusBadRequest},
		{route: "GET /v1/runs/{id}/events", why: "unknown", want: http.StatusNotFound},
		{route: "POST /v1/runs/{id}/cancel", why: "cancelling", setup: running, want: http.StatusAccepted},
		{route: "POST /v1/runs/{id}/cancel", why: "unknown", want: http.StatusNotFound},
		{route: "POST /v1/runs/{id}/cancel", why: "finished", setup: succeeded, want: http.StatusConflict},
		{route: "POST /v1/runs/{id}/threads/{thread}/cancel", why: "cancelling", setup: running, want: http.StatusAccepted},
		{route: "POST /v1/runs/{id}/threads/{thread}/cancel", why: "unknown thread", setup: running,
			path: "/v1/runs/r1/threads/unknown/cancel", want: http.StatusNotFound},
		{route: "POST /v1/runs/{id}/threads/{thread}/cancel", why: "finished", setup: succeeded, want: http.StatusConflict},
		{route: "POST /v1/runs/{id}/resume", why: "resumed", setup: func(f *fakeBackend) { f.addRun("r1", event.Failed) }, want: http.StatusAccepted},
		{route: "POST /v1/runs/{id}/resume", why: "unknown", want: http.StatusNotFound},
		{route: "POST /v1/runs/{id}/resume", why: "running", setup: running, want: http.StatusConflict},
		{route: "GET /v1/runs/{id}/threads", why: "listed", setup: succeeded, want: http.StatusOK},
		{route: "GET /v1/runs/{id}/threads", why: "unknown", want: http.StatusNotFound},
		{route: "GET /v1/runs/{id}/threads/{thread}", why: "found", want: http.StatusOK,
			setup: func(f *fakeBackend) { f.transcripts = map[string]Transcript{"r1/t1": {RunID: "r1", ThreadID: "t1"}} }},
		{route: "GET /v1/runs/{id}/threads/{thread}", why: "unknown", want: http.StatusNotFound},
		{route: "GET /v1/approvals", why: "listed", setup: approval(false), want: http.StatusOK},
		{route: "POST /v1/approvals/{id}", why: "decided", path: "/v1/approvals/a1", setup: approval(false),
			body: okBody["POST /v1/approvals/{id}"], want: http.StatusOK},
		{route: "POST /v1/approvals/{id}", why: "bad decision", path: "/v1/approvals/a1", setup: approval(false),
			body: map[string]any{"decision": "maybe"}, want: http.StatusBadRequest},
		{route: "POST /v1/approvals/{id}", why: "unknown", path: "/v1/approvals/a9", body: okBody["POST /v1/approvals/{id}"], want: http.StatusNotFound},
		{route: "POST /v1/approvals/{id}", why: "answered", path: "/v1/approvals/a1", setup: approval(true),
			body: okBody["POST /v1/approvals/{id}"], want: http.StatusConflict},
		{route: "POST /v1/approvals/{id}", why: "too large", cfg: small, path: "/v1/approvals/a1", setup: approval(false),
			body: map[string]any{"decision": "allow", "x": big}, want: http.StatusRequestEntityTooLarge},
		{route: "GET /v1/workers", why: "listed", want: http.StatusOK},
		{route: "GET /v1/assets", why: "counted", want: http.StatusOK},
		{route: "GET /v1/openapi.json", why: "served", want: http.StatusOK},
		{route: "GET /healthz", why: "alive", want: http.StatusOK},
		{route: "GET /readyz", why: "ready", want: http.StatusOK},
		{route: "GET /readyz", why: "not ready", setup: func(f *fakeBackend) { f.readyErr = errors.New("nats is down") }, want: http.StatusServiceUnavailable},
		{route: "GET /metrics", why: "on", cfg: &Config{Token: testToken, Metrics: metrics.New(metrics.Coordinator)}, want: http.StatusOK},
		{route: "GET /metrics", why: "off", want: http.StatusNotFound},
	}...)

	triggered := map[string][]string{} // statuses by route
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %d %s", c.route, c.want, c.why), func(t *testing.T) {
			method, pattern, _ := strings.Cut(c.route, " ")
			if c.method == "" {
				c.method = method
			}
			if c.path == "" {
				c.path = strings.NewReplacer("{id}", "r1", "{thread}", "t1").Replace(pattern)
			}
			cfg := Config{Token: testToken}
			if c.cfg != nil {
				cfg = *c.cfg
			}
			h := newHarness(t, cfg)
			if c.setup != nil {
				c.setup(h.fake)
			}
			if c.noToken {
				h.token = ""
			}
			r := h.do(c.method, c.path, c.body, c.header...)
			if r.status != c.want {
				t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, r.status, r.body, c.want)
			}
			if !documented(doc, method, pattern, r.status) {
				t.Errorf("%s answers %d, which the document does not list for it", c.route, r.status)
			}
		})
		triggered[c.route] = append(triggered[c.route], strconv.Itoa(c.want))
	}
	for path, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			route := strings.ToUpper(method) + " " + path
			for status := range o.(map[string]any)["responses"].(map[string]any) {
				if !slices.Contains(triggered[route], status) {
					t.Errorf("%s documents %s, which no case makes it answer", route, status)
				}
			}
		}
	}
}

// documented reports whether the document lists status for an operation.
func documented(doc map[string]any, method, path string, status int) bool {
	item, _ := doc["paths"].(map[string]any)[path].(map[string]any)
	o, _ := item[strings.ToLower(method)].(map[string]any)
	responses, _ := o["responses"].(map[string]any)
	_, ok := responses[strconv.Itoa(status)]
	return ok
}
