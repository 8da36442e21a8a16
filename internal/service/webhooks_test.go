package service_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/webhook"
	"github.com/formica-run/formica/internal/wire"
)

// hookSecret is the Standard Webhooks specification's example secret.
const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookCall is one call a receiver got, its signature verified.
type hookCall struct {
	id      string
	path    string
	body    []byte
	payload webhook.Payload
	data    webhook.RunData
	status  int // what the receiver answered
}

// receiver is an HTTP endpoint that verifies every call's signature with
// the specification's own library, and answers each message's first
// failFirst[path] calls with 503.
type receiver struct {
	t        *testing.T
	verifier *standardwebhooks.Webhook
	srv      *httptest.Server

	mu        sync.Mutex
	failFirst map[string]int
	seen      map[string]int // calls per webhook-id
	// hold, when set, is called on a path's first call before it answers:
	// it may keep the call open.
	hold  func(r *http.Request) bool
	calls chan hookCall
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	v, err := standardwebhooks.NewWebhook(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, verifier: v, failFirst: map[string]int{}, seen: map[string]int{}, calls: make(chan hookCall, 64)}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if err := rc.verifier.Verify(body, r.Header); err != nil {
		rc.t.Errorf("call to %s: signature refused: %v", r.URL.Path, err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	c := hookCall{id: r.Header.Get("webhook-id"), path: r.URL.Path, body: body}
	if err := json.Unmarshal(body, &c.payload); err != nil {
		rc.t.Errorf("body %s: %v", body, err)
	}
	var raw struct{ Data webhook.RunData }
	json.Unmarshal(body, &raw)
	c.data = raw.Data
	rc.mu.Lock()
	rc.seen[c.id]++
	n := rc.seen[c.id]
	fail := n <= rc.failFirst[r.URL.Path]
	hold := rc.hold
	rc.mu.Unlock()
	if hold != nil && n == 1 && hold(r) {
		return // the caller gave up the call
	}
	c.status = http.StatusNoContent
	if fail {
		c.status = http.StatusServiceUnavailable
	}
	w.WriteHeader(c.status)
	rc.calls <- c
}

// next is the receiver's next call.
func (rc *receiver) next(t *testing.T, what string) hookCall {
	t.Helper()
	select {
	case c := <-rc.calls:
		return c
	case <-time.After(waitTimeout):
		t.Fatalf("no webhook call %s within %v", what, waitTimeout)
		return hookCall{}
	}
}

// hookStack starts a durable stack whose coordinator calls the receiver's
// /all for every run and lets submissions name URLs under /mine/, its
// retries paced by a 10ms backoff, with a service and the HTTP API over it.
func hookStack(t *testing.T, srv *broker.Server, id string, rc *receiver, change ...func(*embedded.Config)) (*embedded.Stack, *service.Service, *httptest.Server) {
	t.Helper()
	secret, err := webhook.ParseSecret(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	cfg := embedded.Config{Workers: 1, Slots: 4, Durable: true,
		Connect: func(name string) (*nats.Conn, error) { return srv.Connect(name) }, LocalServer: srv,
		Models:            runner.ModelOpenerFunc(providers.Open),
		HeartbeatInterval: 200 * time.Millisecond, Metrics: metrics.New(metrics.All),
		Coordinator: coordinator.Config{ID: id, Cwd: t.TempDir(), Webhooks: coordinator.WebhookConfig{
			URLs: []string{rc.srv.URL + "/all"}, Allow: webhook.AllowList{rc.srv.URL + "/mine/"}, Secret: secret,
			Delivery: webhook.Config{Backoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Attempts: 5}}}}
	for _, f := range change {
		f(&cfg)
	}
	s, err := embedded.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	nc, err := s.Connect("tester")
	if err != nil {
		t.Fatal(err)
	}
	_, svc := openService(t, nc, store.Config{Client: true})
	as, err := api.New(api.Config{}, svc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(as.Handler())
	t.Cleanup(hs.Close)
	return s, svc, hs
}

// hookServer starts a NATS server with JetStream on disk, the store the
// coordinators of a test share.
func hookServer(t *testing.T) *broker.Server {
	t.Helper()
	srv, err := broker.StartServer(context.Background(), broker.ServerConfig{DataDir: t.TempDir(), JetStream: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// submitHTTP posts body to POST /v1/runs and returns the status and the
// answer.
func submitHTTP(t *testing.T, hs *httptest.Server, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(hs.URL+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runEvents reads GET /v1/runs/{id}/events of a finished run to its end.
func runEvents(t *testing.T, hs *httptest.Server, id string) []event.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/runs/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []event.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			e, err := event.Unmarshal([]byte(data))
			if err != nil {
				t.Fatalf("event %s: %v", data, err)
			}
			out = append(out, e)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("the events of finished run %s did not end within %v", id, waitTimeout)
	}
	return out
}

// waitStored waits until run id's stored events hold one of type typ
// whose attempt is attempt: the events stream republishes each batch it
// stores, and this listens there.
func waitStored(t *testing.T, nc *nats.Conn, sub *nats.Subscription, typ event.Type, attempt int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("no stored %s (attempt %d) within %v: %v", typ, attempt, waitTimeout, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(m.Data)), "\n") {
			if e, err := event.Unmarshal([]byte(line)); err == nil && e.Type == typ && e.Attempt == attempt {
				return
			}
		}
	}
}

// TestWebhooksSignedRetriedAndRecorded: every finished run's end is one
// signed call per URL, each message with an id of its own; a receiver that
// fails gets the same message (same id) again until it answers 2xx, each
// outcome is in the run's events (which still end), and a submission
// naming a URL outside the allow-list is refused with 400.
func TestWebhooksSignedRetriedAndRecorded(t *testing.T) {
	rc := newReceiver(t)
	m := metrics.New(metrics.Coordinator)
	s, svc, hs := hookStack(t, hookServer(t), "c1", rc, func(c *embedded.Config) { c.Metrics = m })
	ctx := context.Background()

	// Two runs, two calls to /all, two ids.
	ids := map[string]string{}
	for _, id := range []string{"hook-1", "hook-2"} {
		if _, err := svc.Submit(ctx, simRun(id, "Plan:\n- a", 0)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		c := rc.next(t, "for a finished run")
		if c.path != "/all" || c.payload.Type != webhook.RunFinished || c.data.Status != event.Succeeded || c.data.Output != "a: done: a" {
			t.Fatalf("call %+v, want run.finished of a succeeded run to /all", c)
		}
		if c.data.Totals.Done != 2 || c.data.Totals.InputTokens == 0 || c.data.FinishedAt.IsZero() {
			t.Errorf("run %s: totals %+v, finished %v", c.data.RunID, c.data.Totals, c.data.FinishedAt)
		}
		ids[c.data.RunID] = c.id
	}
	if len(ids) != 2 || ids["hook-1"] == ids["hook-2"] || ids["hook-1"] == "" {
		t.Fatalf("webhook ids by run: %v, want two distinct", ids)
	}

	// A submitter's own URL, whose receiver fails twice: the same id comes
	// three times, the third answered 204.
	rc.mu.Lock()
	rc.failFirst["/mine/flaky"] = 2
	rc.mu.Unlock()
	nc, err := s.Connect("watcher")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := nc.SubscribeSync("formica.stored.events.hook-3")
	if err != nil {
		t.Fatal(err)
	}
	code, answer := submitHTTP(t, hs, `{"id":"hook-3","task":"Plan:\n- a","model":"sim","webhooks":["`+rc.srv.URL+`/mine/flaky"]}`)
	if code != http.StatusAccepted {
		t.Fatalf("submit with an allowed webhook: %d %s", code, answer)
	}
	var flaky []hookCall
	for len(flaky) < 3 {
		if c := rc.next(t, "for hook-3"); c.path == "/mine/flaky" {
			flaky = append(flaky, c)
		}
	}
	for i, c := range flaky {
		want := http.StatusServiceUnavailable
		if i == 2 {
			want = http.StatusNoContent
		}
		if c.id != flaky[0].id || c.status != want || c.data.RunID != "hook-3" {
			t.Errorf("call %d: id %s status %d run %s, want id %s status %d", i+1, c.id, c.status, c.data.RunID, flaky[0].id, want)
		}
	}
	waitStored(t, nc, stored, event.WebhookDelivered, 3)

	var got []string
	for _, e := range runEvents(t, hs, "hook-3") {
		if e.Type == event.WebhookDelivered || e.Type == event.WebhookFailed {
			if strings.HasSuffix(e.URL, "/mine/flaky") {
				got = append(got, string(e.Type)+" "+itoa(e.Attempt)+" "+itoa(e.StatusCode))
			}
		}
	}
	want := []string{"webhook.failed 1 503", "webhook.failed 2 503", "webhook.delivered 3 204"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the run's webhook events: %q, want %q", got, want)
	}
	// Counted before they are events: the 3 of /mine/flaky, and at least
	// the runs' calls to /all seen so far.
	if n := deliveries(t, m); n[metrics.WebhookRetried] != 2 || n[metrics.WebhookDelivered] < 3 || n[metrics.WebhookFailed] != 0 {
		t.Errorf("formica_webhook_deliveries_total %v, want 2 retried, 3 or more delivered", n)
	}

	// Outside the allow-list (another path, another host, another scheme):
	// refused at the door, nothing queued.
	for u, why := range map[string]string{
		rc.srv.URL + "/admin":                      "is under none of the prefixes allowed by --webhook-allow",
		"http://169.254.169.254/latest/meta-data/": "is under none of the prefixes allowed by --webhook-allow",
		"file:///etc/passwd":                       "is not http or https",
	} {
		code, answer := submitHTTP(t, hs, `{"id":"refused-1","task":"x","model":"sim","webhooks":["`+u+`"]}`)
		if code != http.StatusBadRequest || !strings.Contains(answer, `webhooks: \"`+u+`\" `+why) {
			t.Errorf("submit naming %s: %d %s, want 400 saying it %s", u, code, answer, why)
		}
	}
	if _, err := svc.GetRun(ctx, "refused-1"); err == nil {
		t.Error("a refused submission has a record")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestWebhookOutlivesItsCoordinator: a coordinator stopped while a run's
// call is under way gives the call back to the store; another coordinator
// on the same store makes it, with the same id. (One that dies without a
// word leaves it claimed for the stream's ack wait, a minute, first.)
func TestWebhookOutlivesItsCoordinator(t *testing.T) {
	rc := newReceiver(t)
	first := make(chan string, 1)
	rc.hold = func(r *http.Request) bool {
		// The first call waits until its caller gives it up.
		first <- r.Header.Get("webhook-id")
		select {
		case <-r.Context().Done():
		case <-time.After(waitTimeout):
		}
		return true
	}
	srv := hookServer(t)
	s1, svc, _ := hookStack(t, srv, "c1", rc)
	if _, err := svc.Submit(context.Background(), simRun("kept-1", "Plan:\n- a", 0)); err != nil {
		t.Fatal(err)
	}
	var id string
	select {
	case id = <-first:
	case <-time.After(waitTimeout):
		t.Fatalf("no call within %v", waitTimeout)
	}
	svc.Close()
	if err := s1.Stop(); err != nil {
		t.Logf("stop: %v", err)
	}
	rc.mu.Lock()
	rc.hold = nil
	rc.mu.Unlock()

	hookStack(t, srv, "c2", rc)
	c := rc.next(t, "from the second coordinator")
	if c.id != id || c.data.RunID != "kept-1" || c.status != http.StatusNoContent {
		t.Fatalf("call %+v, want run kept-1's message %s delivered", c, id)
	}
}

// TestWebhookOfARunFinishedBeforeItsAck: a coordinator that died after
// it stored a run's final record, before it kept the run's calls and
// acked the submission, leaves the submission in the queue; the
// coordinator that gets it sees the record final and makes the calls.
func TestWebhookOfARunFinishedBeforeItsAck(t *testing.T) {
	rc := newReceiver(t)
	s, _, _ := hookStack(t, hookServer(t), "c1", rc)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub := simRun("crashed-1", "x", 0)
	now := time.Now().UTC()
	if _, err := s.Store.CreateRecord(ctx, record.Run{RunID: "crashed-1", Status: event.Succeeded, Output: "done before the crash",
		Task: sub.Task, CreatedAt: now, FinishedAt: now, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Requeue(ctx, wire.RunSubmit{RunID: "crashed-1", Task: sub.Task, Agent: *sub.Agent}, "crashed-1"); err != nil {
		t.Fatal(err)
	}
	c := rc.next(t, "for the run finished before its ack")
	if c.data.RunID != "crashed-1" || c.data.Output != "done before the crash" || c.data.Status != event.Succeeded {
		t.Fatalf("call %+v, want run crashed-1's end", c)
	}
}

// TestWebhookWhenAnApprovalWaits: with approval.waiting among the events,
// a tool call held for a person is a signed call naming the approval, and
// the run's end is another once the person decided.
func TestWebhookWhenAnApprovalWaits(t *testing.T) {
	rc := newReceiver(t)
	script := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(script, []byte(`responses:
  - when: approve-me
    tool_calls:
      - name: write_file
        arguments: '{"path":"out.txt","content":"x"}'
  - when: approve-me
    text: written
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, svc, _ := hookStack(t, hookServer(t), "c1", rc, func(c *embedded.Config) {
		c.AllowScripted, c.Coordinator.AllowScripted = true, true
		c.Coordinator.Webhooks.Events = []string{webhook.RunFinished, webhook.ApprovalWaiting}
	})
	ctx := context.Background()
	req := simRun("asks-1", "approve-me", 0)
	req.Agent.Model = "scripted:" + script
	if _, err := svc.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	c := rc.next(t, "for the approval")
	var raw struct{ Data webhook.ApprovalData }
	if err := json.Unmarshal(c.body, &raw); err != nil {
		t.Fatal(err)
	}
	as, err := svc.ListApprovals(ctx)
	if err != nil || len(as) != 1 {
		t.Fatalf("approvals %v, %v; want one", as, err)
	}
	a := raw.Data
	if c.payload.Type != webhook.ApprovalWaiting || a.ID != as[0].ID || a.RunID != "asks-1" || a.Tool != "write_file" ||
		a.ThreadID != as[0].ThreadID || !a.ExpiresAt.After(a.RequestedAt) {
		t.Fatalf("call %s %+v, want approval.waiting of %+v", c.payload.Type, a, as[0])
	}
	if err := svc.Decide(ctx, a.ID, true); err != nil {
		t.Fatal(err)
	}
	if c := rc.next(t, "for the run's end"); c.payload.Type != webhook.RunFinished || c.data.RunID != "asks-1" || c.data.Output != "written" {
		t.Fatalf("call %+v, want asks-1's run.finished", c)
	}
}

// deliveries reads formica_webhook_deliveries_total by outcome.
func deliveries(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "formica_webhook_deliveries_total" {
			continue
		}
		for _, c := range mf.GetMetric() {
			for _, l := range c.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] = c.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
