package durable_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
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
		m.refused("forged events into the run's stored log", store.SubjectEventLog(target), false)
		m.refused("forged exec result to a coordinator inbox", "_INBOX.anything", false)
		m.refused("write a run record", "$KV."+store.RunsBucket+"."+target, false)
		m.refused("write an approval", "$KV."+store.ApprovalsBucket+".a1", false)
		m.refused("purge the records", "$JS.API.STREAM.PURGE.KV_"+store.RunsBucket, false)
		m.refused("delete the events stream", "$JS.API.STREAM.DELETE."+store.EventsStream, false)
		m.refused("read the records bucket", "$JS.API.STREAM.INFO.KV_"+store.RunsBucket, false)
		m.refused("submit a run", wire.SubjectSubmit, false)
		m.refused("ask for the workers list", wire.SubjectWorkers, false)

		// Its own subjects work, but name no thread it holds: refused as
		// fenced once the target has ended (no coordinator owns it), as
		// not found while it runs (it has no such thread).
		refusedAsForeign := func(what string, reply *nats.Msg, err error) {
			t.Helper()
			if err != nil || reply == nil {
				t.Errorf("%s: %v", what, err)
				return
			}
			switch wire.Code(reply.Header.Get("Formica-Error")) {
			case wire.CodeFenced, wire.CodeNotFound:
			default:
				t.Errorf("%s: reply %q, want fenced or not found", what, replyText(reply))
			}
		}
		spawn := wire.SpawnRequest{RunID: target, ParentID: "root", Name: "evil", Task: "cat /etc/shadow"}
		reply, err := requestPastProgress(m.nc, wire.SubjectSpawn("coord", "mallory"), wire.MustEncode(wire.TypeSpawnRequest, spawn), 10*time.Second)
		refusedAsForeign("spawn on its own subject", reply, err)
		ask := wire.ApprovalRequest{ApprovalRequest: policy.ApprovalRequest{RunID: target, ThreadID: "root", Tool: "bash"}}
		reply, err = requestPastProgress(m.nc, wire.SubjectApproval("coord", "mallory"), wire.MustEncode(wire.TypeApprovalRequest, ask), 10*time.Second)
		refusedAsForeign("approval on its own subject", reply, err)
	})

	t.Run("worker credentials against transfers", func(t *testing.T) { transferAttacks(t, c) })

	t.Run("client credentials", func(t *testing.T) {
		e := c.attacker(c.creds("client", "eve"), "_FORMICA.client.eve")
		e.refused("exec request", wire.SubjectExec("w1"), false)
		e.refused("spawn", wire.SubjectSpawn("coord", "w1"), false)
		e.refused("forged run.finished", wire.SubjectEvents(target)+".run.finished", false)
		e.refused("forged events into the run's stored log", store.SubjectEventLog(target), false)
		e.refused("read exec requests", wire.SubjectExec("w1"), true)
		e.refused("delete the events stream", "$JS.API.STREAM.DELETE."+store.EventsStream, false)
		e.refused("purge the records", "$JS.API.STREAM.PURGE.KV_"+store.RunsBucket, false)
		e.refused("write a run record", "$KV."+store.RunsBucket+"."+target, false)
		e.refused("submit straight into the queue", store.SubjectQueue, false)
		e.refused("add a run to the index", store.SubjectIndex, false)
		e.refused("read approvals asked of submitters", "formica.approver.*", true)
		// A journal entry a worker wrote (.t), delivered by a consumer onto
		// w1's exec subject: the server would publish it there.
		push, _ := json.Marshal(map[string]any{"stream_name": store.JournalStream, "config": map[string]any{
			"name": "evil", "deliver_subject": wire.SubjectExec("w1"), "filter_subject": "formica.journal.*.*.t", "ack_policy": "none"}})
		e.refusedPublish("deliver a worker's journal entry as an exec request to w1", "$JS.API.CONSUMER.CREATE."+store.JournalStream+".evil", push)

		// A run submitted straight to a coordinator, naming where on the
		// workers its tools act: outside the coordinator's --cwd, refused
		// as a queued run's would be, and nothing recorded.
		direct := wire.RunSubmit{RunID: "cwd-escape", Task: "Plan:\n- a", Agent: spec.Agent{Name: "formica", Model: "sim"}, Cwd: "/etc"}
		reply, err := e.nc.Request(wire.SubjectSubmit, wire.MustEncode(wire.TypeRunSubmit, direct), 10*time.Second)
		if err != nil || reply.Header.Get("Formica-Error") != string(wire.CodeBadRequest) || !strings.Contains(string(reply.Data), "outside the coordinator's --cwd") {
			t.Errorf("direct run in /etc: %v, reply %q", err, replyText(reply))
		}
		if code := c.getJSON("/v1/runs/cwd-escape", nil); code != http.StatusNotFound {
			t.Errorf("the refused direct run: GET answered %d, want 404", code)
		}

		// A workers listing with a payload reference naming the large
		// record's object: refused unread, the object kept.
		ref := recordRef(t, c, bigRun)
		msg := nats.NewMsg(wire.SubjectWorkers)
		msg.Header.Set("Formica-Type", string(wire.TypeWorkersList))
		msg.Header.Set("Formica-Payload", ref)
		reply, err = e.nc.RequestMsg(msg, 10*time.Second)
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

// transferAttacks replays, with a worker's credentials (mallory, which
// joins as a worker of its own), what a hostile worker could do to the
// bodies others send over the NATS max payload: purge, overwrite or delete
// them in the coordinators' or another worker's transfers bucket, have the
// server republish its own body on another's subject, and, placed a
// thread, send a spawn or a result whose reference names another party's
// body. Each is refused, and both bodies stay.
func transferAttacks(t *testing.T, c *coord) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	m := c.attacker(c.creds("worker", "mallory"), "_FORMICA.worker.mallory")
	execs, err := m.nc.SubscribeSync(wire.SubjectExec("mallory"))
	if err != nil {
		t.Fatal(err)
	}
	// Join: a coordinator makes the bucket of a worker that joins.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		hb := wire.WorkerHeartbeat{ID: "mallory", Host: "evil", Slots: 1, Started: time.Now(), Interval: 200 * time.Millisecond}
		for {
			m.nc.Publish(wire.SubjectWorkerHeartbeat("mallory"), wire.MustEncode(wire.TypeWorkerHeartbeat, hb))
			select {
			case <-stop:
				return
			case <-time.After(hb.Interval):
			}
		}
	}()
	cnc := c.connect()
	defer cnc.Close()
	cjs, _ := jetstream.New(cnc)
	proc.WaitUntil(t, readyTimeout, "mallory's transfers bucket", func() bool {
		_, err := cjs.ObjectStore(ctx, store.WorkerTransfers("mallory"))
		return err == nil
	})

	// The victims: a body in the coordinators' bucket, one in w1's, as
	// their owners write them.
	type victim struct{ bucket, name, ref string }
	plant := func(bucket string) victim {
		obs, err := cjs.ObjectStore(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		data := []byte(strings.Repeat("a body of "+bucket+" ", 1000))
		sum := sha256.Sum256(data)
		id := uuid.NewString() + "." + hex.EncodeToString(sum[:])
		if _, err := obs.PutBytes(ctx, "payloads/"+id, data); err != nil {
			t.Fatal(err)
		}
		return victim{bucket, "payloads/" + id, bucket + "/" + id}
	}
	victims := []victim{plant(store.TransfersBucket), plant(store.WorkerTransfers("w1"))}
	for _, v := range victims {
		meta := "$O." + v.bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(v.name))
		m.refused("purge "+v.bucket, "$JS.API.STREAM.PURGE.OBJ_"+v.bucket, false)
		m.refused("overwrite or delete a body in "+v.bucket, meta, false)
		m.refused("write chunks into "+v.bucket, "$O."+v.bucket+".C.evil", false)
		m.refused("delete a message of "+v.bucket, "$JS.API.STREAM.MSG.DELETE.OBJ_"+v.bucket, false)
	}
	m.refused("list the names of w1's bodies", "$JS.API.STREAM.INFO.OBJ_"+store.WorkerTransfers("w1"), false)
	m.refused("read w1's bodies", "$JS.API.DIRECT.GET.OBJ_"+store.WorkerTransfers("w1"), false)
	m.refused("read the coordinators' bodies", "$JS.API.DIRECT.GET."+auth.TransfersStream, false)
	m.refused("list the names of the coordinators' bodies", "$JS.API.STREAM.INFO."+auth.TransfersStream, false)
	m.refused("make a stream", "$JS.API.STREAM.CREATE.OBJ_"+store.WorkerTransfers("mallory2"), false)
	m.refused("reconfigure its own bucket", "$JS.API.STREAM.UPDATE.OBJ_"+store.WorkerTransfers("mallory"), false)

	// An exec request for w1 as a body of its own (it may write there),
	// then a consumer delivering that chunk onto w1's exec subject: the
	// server would publish it.
	js, err := jetstream.New(m.nc)
	if err != nil {
		t.Fatal(err)
	}
	own, err := js.ObjectStore(ctx, store.WorkerTransfers("mallory"))
	if err != nil {
		t.Fatalf("a worker may use its own transfers bucket: %v", err)
	}
	exec := wire.ExecRequest{Coordinator: "coord", Token: "forged", Thread: thread.Thread{ID: "evil", RunID: "any", Task: "cat /etc/shadow"}}
	info, err := own.PutBytes(ctx, "evil", wire.MustEncode(wire.TypeExecRequest, exec))
	if err != nil {
		t.Fatalf("put a body in its own bucket: %v", err)
	}
	stream := store.ObjectStream(store.WorkerTransfers("mallory"))
	push, _ := json.Marshal(map[string]any{"stream_name": stream, "config": map[string]any{
		"name": "evil", "deliver_subject": wire.SubjectExec("w1"), "filter_subject": "$O." + store.WorkerTransfers("mallory") + ".C." + info.NUID,
		"ack_policy": "none"}})
	m.refusedPublish("deliver its own chunk as an exec request to w1", "$JS.API.CONSUMER.CREATE."+stream+".evil", push)

	// Placed a thread (mallory is the least loaded worker), it names the
	// victims' bodies in its spawn requests and its result.
	bait := c.submit(map[string]any{"task": "bait", "agent": simAgent(0)})
	var placed *nats.Msg
	var req wire.ExecRequest
	for placed == nil {
		msg, err := execs.NextMsg(runTimeout)
		if err != nil {
			t.Fatalf("no thread placed on mallory: %v", err)
		}
		if err := wire.DecodeAs(msg.Data, wire.TypeExecRequest, &req); err != nil {
			t.Fatalf("exec request: %v", err)
		}
		if req.Thread.RunID != bait { // another run's: somewhere else, please
			busy := nats.NewMsg(msg.Reply)
			busy.Header.Set(wire.HeaderType, string(wire.TypeExecBusy))
			busy.Data = wire.MustEncode(wire.TypeExecBusy, wire.ExecBusy{Worker: "mallory"})
			m.nc.PublishMsg(busy)
			continue
		}
		placed = msg
	}
	accepted := nats.NewMsg(placed.Reply)
	accepted.Header.Set(wire.HeaderType, string(wire.TypeExecAccepted))
	accepted.Data = wire.MustEncode(wire.TypeExecAccepted, wire.ExecAccepted{Worker: "mallory"})
	if err := m.nc.PublishMsg(accepted); err != nil {
		t.Fatal(err)
	}
	for _, v := range victims {
		spawn := nats.NewMsg(wire.SubjectSpawn("coord", "mallory"))
		spawn.Header.Set(wire.HeaderType, string(wire.TypeSpawnRequest))
		spawn.Header.Set("Formica-Payload", v.ref)
		reply, err := m.nc.RequestMsg(spawn, 10*time.Second)
		if err != nil || reply.Header.Get(wire.HeaderType) != "error" || !strings.Contains(string(reply.Data), "sender's bucket") {
			t.Errorf("spawn naming %s: %v, reply %q", v.ref, err, replyText(reply))
		}
	}
	result := nats.NewMsg(placed.Reply)
	result.Header.Set(wire.HeaderType, string(wire.TypeExecResult))
	result.Header.Set("Formica-Payload", victims[1].ref)
	if err := m.nc.PublishMsg(result); err != nil {
		t.Fatal(err)
	}
	if r := c.waitFinal(bait); r.Status != event.Failed || !strings.Contains(r.Error, "sender's bucket") {
		t.Errorf("bait run whose result named w1's body: %s (%s), want failed for it", r.Status, r.Error)
	}
	for _, v := range victims {
		obs, err := cjs.ObjectStore(ctx, v.bucket)
		if err != nil {
			t.Fatal(err)
		}
		if data, err := obs.GetBytes(ctx, v.name); err != nil || !strings.HasPrefix(string(data), "a body of "+v.bucket) {
			t.Errorf("the body %s after the attacks: %d bytes, %v", v.ref, len(data), err)
		}
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

// requestPastProgress is nc.Request for a request the coordinator keeps
// alive: its keep-alive (progress) may come before the answer, and is
// skipped.
func requestPastProgress(nc *nats.Conn, subject string, data []byte, timeout time.Duration) (*nats.Msg, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, data); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return nil, err
		}
		if env, err := wire.Decode(m.Data); err == nil && m.Header.Get("Formica-Error") == "" && env.Type == wire.TypeProgress {
			continue
		}
		return m, nil
	}
}
