package durable_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
	"github.com/formica-run/formica/test/proc"
)

// TestApprovalsOnlyThroughTheCoordinator replays, with a client's
// credentials over TCP, a write to the approvals bucket that marks a held
// approval allowed: the server refuses it (a core publish and a JetStream
// KV put alike), the approval stays pending and the tool unapproved. The
// documented path, `formica approve`, still answers it, and the run goes on.
func TestApprovalsOnlyThroughTheCoordinator(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{approvalTimeout: "2m"})
	c.startWorker("w1", 8)
	script, _ := approvalScript(t, "kv")
	run := c.submit(map[string]any{"task": "root-kv", "model": "scripted:" + script})
	held := c.waitApproval(run)

	e := c.attacker(c.creds("client", "eve"), "_FORMICA.client.eve")
	forged, _ := json.Marshal(store.Approval{ID: held.ID, RunID: run, ThreadID: held.ThreadID, ThreadPath: held.ThreadPath,
		Tool: held.Tool, Arguments: held.Arguments, RequestedAt: held.RequestedAt, Decision: store.DecisionAllow, DecidedAt: time.Now()})
	e.refusedPublish("allow an approval by a KV write", "$KV."+store.ApprovalsBucket+"."+held.ID, forged)

	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, store.ApprovalsBucket)
	if err != nil {
		t.Fatalf("a client may read the approvals bucket: %v", err)
	}
	putCtx, putCancel := context.WithTimeout(ctx, 3*time.Second)
	if _, err := kv.Put(putCtx, held.ID, forged); err == nil {
		t.Errorf("a client's KV put of approval %s succeeded", held.ID)
	}
	putCancel()
	entry, err := kv.Get(ctx, held.ID)
	if err != nil {
		t.Fatalf("read approval %s back: %v", held.ID, err)
	}
	var stored store.Approval
	if err := json.Unmarshal(entry.Value(), &stored); err != nil || !stored.Pending() {
		t.Errorf("approval %s after the forged writes: %+v (%v), want pending", held.ID, stored, err)
	}
	var pending []api.Approval
	c.call(http.StatusOK, http.MethodGet, "/v1/approvals", nil, &pending)
	if len(pending) != 1 || pending[0].ID != held.ID {
		t.Errorf("pending approvals after the forged writes: %+v, want %s", pending, held.ID)
	}
	if rec := c.record(run); rec.Status != event.Running {
		t.Errorf("run %s is %s while its approval waits", run, rec.Status)
	}
	if _, err := os.Stat(filepath.Join(c.cwd, "out-kv.txt")); !os.IsNotExist(err) {
		t.Errorf("write_file ran before anyone approved it (%v)", err)
	}

	if r := c.cli("approve", held.ID, "--allow"); r.code != 0 {
		t.Fatalf("formica approve %s --allow: exit %d: %s", held.ID, r.code, r.stderr)
	}
	if rec := c.waitFinal(run); rec.Status != event.Succeeded || rec.Output != "root finished" {
		t.Errorf("run %s: %s (%s), output %q", run, rec.Status, rec.Error, rec.Output)
	}
	if data, err := os.ReadFile(filepath.Join(c.cwd, "out-kv.txt")); err != nil || string(data) != "written by c (kv)" {
		t.Errorf("the approved write_file: %q, %v", data, err)
	}
	if c.p.Exited() {
		t.Errorf("coordinator %s", c.p.Status())
	}
}

// TestThreadEventsOnlyThroughTheCoordinator replays, with a worker's
// credentials over TCP, thread events for a live run's root, a thread that
// worker does not host: published straight on the run's subject (refused by
// the server), carried by a spawn or approval request on the worker's own
// subjects (refused as fenced: no placement token), and on a guessed
// placement inbox (nobody takes it). None reaches a watcher on NATS, the
// events stream or SSE; the run's own events all do, thread.started and
// thread.finished once per thread, and the run ends with its real output.
func TestThreadEventsOnlyThroughTheCoordinator(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	w1 := c.startWorker("w1", 4)
	agent := simAgent(0)
	agent["helper"] = map[string]any{"model_args": map[string]any{"latency_ms": 3000}}
	target := c.submit(map[string]any{"task": "Plan:\n- a\n- b", "agent": agent})

	// A watcher on NATS sees everything published for the run.
	nc := c.connect()
	defer nc.Close()
	live, err := nc.SubscribeSync(wire.SubjectEvents(target) + ".>")
	if err != nil {
		t.Fatal(err)
	}
	var root string
	proc.WaitUntil(t, runTimeout, "the target run's helpers run", func() bool {
		rec := c.record(target)
		if len(rec.Threads) < 3 {
			return false
		}
		root = rec.Threads[0].ID
		return true
	})

	forged := event.Event{Type: event.ToolResult, Time: time.Now(), RunID: target, ThreadID: root, Name: "formica",
		Tool: "bash", CallID: "forged", Output: "HIJACKED"}
	m := c.attacker(c.creds("worker", "mallory"), "_FORMICA.worker.mallory")
	data, _ := event.Marshal(forged)
	m.refusedPublish("a thread event on the run's subject", wire.EventSubject(forged), data)

	spawn := wire.SpawnRequest{RunID: target, ParentID: root, Name: "evil", Task: "x", Events: []event.Event{forged}}
	reply, err := m.nc.Request(wire.SubjectSpawn("coord", "mallory"), wire.MustEncode(wire.TypeSpawnRequest, spawn), 10*time.Second)
	if err != nil || reply.Header.Get("Formica-Error") != string(wire.CodeFenced) {
		t.Errorf("events on a spawn request: %v, reply %q", err, replyText(reply))
	}
	ask := wire.ApprovalRequest{ApprovalRequest: policy.ApprovalRequest{RunID: target, ThreadID: root, Tool: "bash"}, Events: []event.Event{forged}}
	reply, err = m.nc.Request(wire.SubjectApproval("coord", "mallory"), wire.MustEncode(wire.TypeApprovalRequest, ask), 10*time.Second)
	if err != nil || reply.Header.Get("Formica-Error") != string(wire.CodeFenced) {
		t.Errorf("events on an approval request: %v, reply %q", err, replyText(reply))
	}
	progress := wire.Progress{ThreadID: root, Token: "AAAAAAAAAAAAAAAAAAAAAA", Events: []event.Event{forged}}
	if err := m.nc.Publish(wire.ExecInboxPrefix+".guessed", wire.MustEncode(wire.TypeProgress, progress)); err != nil {
		t.Fatal(err)
	}
	m.nc.Flush()

	if r := c.waitFinal(target); r.Status != event.Succeeded || r.Output != "a: done: a\nb: done: b" {
		t.Errorf("target run: %s (%s), output %q", r.Status, r.Error, r.Output)
	}
	events, _, _ := c.sse(target, 0, 0)
	seen := map[event.Type]int{}
	for _, e := range events {
		seen[e.e.Type]++
		if strings.Contains(e.data, "HIJACKED") {
			t.Errorf("SSE carries a forged event: %s", e.data)
		}
	}
	for typ, want := range map[event.Type]int{event.ThreadStarted: 3, event.ThreadFinished: 3, event.ToolCall: 2, event.ToolResult: 2} {
		if seen[typ] != want {
			t.Errorf("SSE: %d %s events, want %d (saw %v)", seen[typ], typ, want, seen)
		}
	}
	if seen[event.ModelCall] < 3 {
		t.Errorf("SSE: %d model.call events, want one at least per thread (saw %v)", seen[event.ModelCall], seen)
	}
	for {
		msg, err := live.NextMsg(time.Second)
		if err != nil {
			break
		}
		if strings.Contains(string(msg.Data), "HIJACKED") {
			t.Errorf("a NATS watcher saw a forged event on %s: %s", msg.Subject, msg.Data)
		}
	}
	if c.p.Exited() || w1.Exited() {
		t.Errorf("coordinator %s, worker %s", c.p.Status(), w1.Status())
	}
}
