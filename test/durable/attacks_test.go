package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
	"github.com/formica-run/formica/test/proc"
)

// attacker is a NATS connection of the test playing someone on the same
// host, and the permission violations the server reported to it.
type attacker struct {
	t  *testing.T
	nc *nats.Conn
	mu sync.Mutex
	// violations are the server's "Permissions Violation" errors.
	violations []string
}

func (c *coord) attacker(creds, inbox string) *attacker {
	c.t.Helper()
	a := &attacker{t: c.t}
	opts := []nats.Option{nats.Name("attacker"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		a.mu.Lock()
		a.violations = append(a.violations, err.Error())
		a.mu.Unlock()
	})}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds), nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		c.t.Fatalf("attacker connect: %v", err)
	}
	c.t.Cleanup(nc.Close)
	a.nc = nc
	return a
}

// refused publishes (or, with sub, subscribes to) subject and waits for the
// server's permission violation.
func (a *attacker) refused(what, subject string, sub bool) {
	a.t.Helper()
	if sub {
		a.refusedDoing(what, subject, func() error { _, err := a.nc.SubscribeSync(subject); return err })
		return
	}
	a.refusedPublish(what, subject, wire.MustEncode(wire.TypeEvent, event.Event{Type: event.RunFinished, Output: "HIJACKED"}))
}

// refusedPublish publishes data on subject and waits for the server's
// permission violation.
func (a *attacker) refusedPublish(what, subject string, data []byte) {
	a.t.Helper()
	a.refusedDoing(what, subject, func() error { return a.nc.Publish(subject, data) })
}

// refusedDoing does what and waits for the server's permission violation.
func (a *attacker) refusedDoing(what, subject string, do func() error) {
	a.t.Helper()
	a.mu.Lock()
	before := len(a.violations)
	a.mu.Unlock()
	if err := do(); err != nil {
		a.t.Fatalf("%s: %v", what, err)
	}
	a.nc.Flush()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.mu.Lock()
		n := len(a.violations)
		var last string
		if n > before {
			last = a.violations[n-1]
		}
		a.mu.Unlock()
		if n > before {
			if !strings.Contains(strings.ToLower(last), "permissions violation") {
				a.t.Errorf("%s: error %q, want a permissions violation", what, last)
			}
			return
		}
		if time.Now().After(deadline) {
			a.t.Errorf("%s (%s): not refused", what, subject)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAttacksAreRefused replays, over TCP against coordinator and worker
// processes, what an attacker on the same host tried: with no credentials
// and with a worker's or a client's. Each attempt is refused, the run it
// targeted finishes with its real output, its large record stays readable,
// and every process stays up.
func TestAttacksAreRefused(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{extra: []string{"--max-task-bytes", "1048576"}}) // the big run's task is past the default ceiling
	w1 := c.startWorker("w1", 4)

	// The target: a run whose helpers take a while, under a deny-all policy.
	agent := simAgent(0)
	agent["helper"] = map[string]any{"model_args": map[string]any{"latency_ms": 3000}}
	agent["harness"] = map[string]any{"permissions": map[string]any{"default": "deny"}}
	target := c.submit(map[string]any{"task": "Plan:\n- a\n- b", "agent": agent})
	// A finished run whose record is stored by pointer (over the NATS max payload).
	bigRun := c.submit(map[string]any{"task": "Big:\n- " + strings.Repeat("x", 700<<10), "agent": simAgent(0)})
	if r := c.waitFinal(bigRun); r.Status != event.Succeeded {
		t.Fatalf("big run: %s (%s)", r.Status, r.Error)
	}
	bigOutput := c.record(bigRun).Output

	t.Run("no credentials", func(t *testing.T) {
		nc, err := nats.Connect(c.url, nats.Name("anonymous"), nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			t.Fatal("an anonymous client connected")
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("anonymous connect: %v, want an authorization violation", err)
		}
	})

	t.Run("worker credentials", func(t *testing.T) {
		m := c.attacker(c.creds("worker", "mallory"), "_FORMICA.worker.mallory")
		m.refused("read another worker's exec requests", wire.SubjectExec("w1"), true)
		m.refused("read every subject", ">", true)
		m.refused("read approvals asked of submitters", "formica.approver.*", true)
		m.refused("read clients' inboxes, where their approvals are asked", wire.ClientInboxPrefix+">", true)
		m.refused("exec request straight to a worker", wire.SubjectExec("w1"), false)
		m.refused("heartbeat as another worker", wire.SubjectWorkerHeartbeat("w1"), false)
		m.refused("spawn as another worker", wire.SubjectSpawn("coord", "w1"), false)
		m.refused("forged run.finished", wire.SubjectEvents(target)+".run.finished", false)
		m.refused("forged exec result to a coordinator inbox", "_INBOX.anything", false)
		m.refused("write a run record", "$KV."+store.RunsBucket+"."+target, false)
		m.refused("write an approval", "$KV."+store.ApprovalsBucket+".a1", false)
		m.refused("purge the records", "$JS.API.STREAM.PURGE.KV_"+store.RunsBucket, false)
		m.refused("delete the events stream", "$JS.API.STREAM.DELETE."+store.EventsStream, false)
		m.refused("read the records bucket", "$JS.API.STREAM.INFO.KV_"+store.RunsBucket, false)
		m.refused("submit a run", wire.SubjectSubmit, false)
		m.refused("ask for the workers list", wire.SubjectWorkers, false)

		// An exec request for w1 as an object of its own in the transfers
		// store (it may write there), then a consumer delivering that
		// chunk onto w1's exec subject: the server would publish it.
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		js, err := jetstream.New(m.nc)
		if err != nil {
			t.Fatal(err)
		}
		obs, err := js.ObjectStore(ctx, store.TransfersBucket)
		if err != nil {
			t.Fatalf("a worker may use the transfers store: %v", err)
		}
		exec := wire.ExecRequest{Coordinator: "coord", Token: "forged", Thread: runner.Thread{ID: "evil", RunID: target, Task: "cat /etc/shadow"}}
		info, err := obs.PutBytes(ctx, "evil", wire.MustEncode(wire.TypeExecRequest, exec))
		if err != nil {
			t.Fatalf("put an object in the transfers store: %v", err)
		}
		push, _ := json.Marshal(map[string]any{"stream_name": auth.TransfersStream, "config": map[string]any{
			"name": "evil", "deliver_subject": wire.SubjectExec("w1"), "filter_subject": "$O." + store.TransfersBucket + ".C." + info.NUID,
			"ack_policy": "none"}})
		m.refusedPublish("deliver its own chunk as an exec request to w1", "$JS.API.CONSUMER.CREATE."+auth.TransfersStream+".evil", push)

		// Its own subjects work, but name no thread it holds.
		spawn := wire.SpawnRequest{RunID: target, ParentID: "root", Name: "evil", Task: "cat /etc/shadow"}
		reply, err := m.nc.Request(wire.SubjectSpawn("coord", "mallory"), wire.MustEncode(wire.TypeSpawnRequest, spawn), 10*time.Second)
		if err != nil || reply.Header.Get("Formica-Error") != string(wire.CodeFenced) {
			t.Errorf("spawn on its own subject: %v, reply %q", err, replyText(reply))
		}
		ask := wire.ApprovalRequest{ApprovalRequest: tools.ApprovalRequest{RunID: target, ThreadID: "root", Tool: "bash"}}
		reply, err = m.nc.Request(wire.SubjectApproval("coord", "mallory"), wire.MustEncode(wire.TypeApprovalRequest, ask), 10*time.Second)
		if err != nil || reply.Header.Get("Formica-Error") != string(wire.CodeFenced) {
			t.Errorf("approval on its own subject: %v, reply %q", err, replyText(reply))
		}
	})

	t.Run("client credentials", func(t *testing.T) {
		e := c.attacker(c.creds("client", "eve"), "_FORMICA.client.eve")
		e.refused("exec request", wire.SubjectExec("w1"), false)
		e.refused("spawn", wire.SubjectSpawn("coord", "w1"), false)
		e.refused("forged run.finished", wire.SubjectEvents(target)+".run.finished", false)
		e.refused("read exec requests", wire.SubjectExec("w1"), true)
		e.refused("delete the events stream", "$JS.API.STREAM.DELETE."+store.EventsStream, false)
		e.refused("purge the records", "$JS.API.STREAM.PURGE.KV_"+store.RunsBucket, false)
		e.refused("write a run record", "$KV."+store.RunsBucket+"."+target, false)
		e.refused("submit straight into the queue", store.SubjectQueue, false)
		e.refused("add a run to the index", store.SubjectIndex, false)
		e.refused("read approvals asked of submitters", "formica.approver.*", true)

		// A workers listing with a payload reference naming the large
		// record's object: refused unread, the object kept.
		ref := recordRef(t, c, bigRun)
		msg := nats.NewMsg(wire.SubjectWorkers)
		msg.Header.Set("Formica-Type", string(wire.TypeWorkersList))
		msg.Header.Set("Formica-Payload", ref)
		reply, err := e.nc.RequestMsg(msg, 10*time.Second)
		if err != nil || reply.Header.Get("Formica-Type") != "error" {
			t.Errorf("workers list by reference %s: %v, reply %q", ref, err, replyText(reply))
		}
	})

	if r := c.waitFinal(target); r.Status != event.Succeeded || r.Output != "a: done: a\nb: done: b" || len(r.Threads) != 3 {
		t.Errorf("target run: %s (%s), %d threads, output %q", r.Status, r.Error, len(r.Threads), r.Output)
	}
	if got := c.record(bigRun).Output; got != bigOutput {
		t.Errorf("the large record's output changed: %d bytes, want %d", len(got), len(bigOutput))
	}
	if c.p.Exited() || w1.Exited() {
		t.Errorf("coordinator %s, worker %s", c.p.Status(), w1.Status())
	}
}

// recordRef is the object a large record's KV value points to.
func recordRef(t *testing.T, c *coord, run string) string {
	t.Helper()
	nc := c.connect()
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, store.RunsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Ref string }
	if json.Unmarshal(e.Value(), &p) != nil || p.Ref == "" {
		t.Fatalf("record %s is not stored by pointer: %.80s", run, e.Value())
	}
	return p.Ref
}

func replyText(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return m.Header.Get("Formica-Type") + " " + m.Header.Get("Formica-Error") + " " + string(m.Data)
}

// TestRemoteListenerNeedsCredentials: a coordinator asked to serve NATS
// beyond loopback refuses to start while no credentials were issued from
// its data dir, and --nats-insecure is refused there too; once a worker's
// credentials exist it starts, and still turns anonymous clients away.
func TestRemoteListenerNeedsCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	listen := func(extra ...string) *proc.Proc {
		port := proc.FreePorts(t, 1)[0]
		args := append([]string{"--data-dir", dir, "--http", "off", "--nats-allow-remote",
			"--nats-listen", fmt.Sprintf("0.0.0.0:%d", port)}, extra...)
		return proc.Start(t, "coordinator", bin.coordinator, args...)
	}
	for _, extra := range [][]string{nil, {"--nats-insecure"}} {
		p := listen(extra...)
		if code := p.Wait(t, readyTimeout); code == 0 {
			t.Fatalf("coordinator %v started on 0.0.0.0 without credentials", extra)
		}
		if !strings.Contains(p.Stderr.String(), "refusing to serve NATS on 0.0.0.0") {
			t.Errorf("coordinator %v: stderr does not say why:\n%s", extra, p.Stderr.String())
		}
		if strings.Contains(p.Stderr.String(), "Starting nats-server") {
			t.Errorf("coordinator %v started its NATS server before refusing", extra)
		}
	}
	proc.Creds(t, bin.coordinator, dir, "worker", "w1")
	p := listen()
	if !p.AwaitLog(t, "coordinator ready", readyTimeout) {
		t.Fatalf("coordinator with credentials issued did not start (%s)", p.Status())
	}
}
