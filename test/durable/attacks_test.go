package durable_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
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
		m.refused("ask for the JetStream assets", wire.SubjectAssets, false)

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
// bodies others send over the NATS max payload, every party's in the one
// transfers stream: read, overwrite, delete or purge them (the
// coordinators' and w1's), by their subjects, by wildcards, in batches or
// by sequence; purge or overwrite them through the stream, by headers on
// a message of its own place (a rollup, a schedule, a TTL); have the
// server republish its own body on another's subject; and, placed a
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
	// Join, to be placed a thread below.
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
	proc.WaitUntil(t, readyTimeout, "the coordinator lists mallory", func() bool {
		var ws []struct{ ID string }
		c.getJSON("/v1/workers", &ws)
		for _, w := range ws {
			if w.ID == "mallory" {
				return true
			}
		}
		return false
	})
	cnc := c.connect()
	defer cnc.Close()
	cjs, _ := jetstream.New(cnc)

	// The victims: a body in the coordinators' place, one in w1's, as
	// their writers write them (one chunk each).
	type victim struct{ place, chunk, ref string }
	plant := func(place string) victim {
		data := []byte(strings.Repeat("a body of "+place+" ", 1000))
		sum := sha256.Sum256(data)
		id := uuid.NewString()
		v := victim{place, place + "." + id + ".0", place + "/" + id + "." + hex.EncodeToString(sum[:]) + ".1"}
		if _, err := cjs.Publish(ctx, v.chunk, data); err != nil {
			t.Fatal(err)
		}
		return v
	}
	victims := []victim{plant(store.CoordinatorsPlace), plant(store.WorkerPlace("w1"))}
	direct := "$JS.API.DIRECT.GET." + store.TransfersStream + "."
	victims = append(victims, plant(store.ToWorkerPlace("w1")))
	for _, v := range victims {
		m.refused("overwrite a body in "+v.place, v.chunk, false)
		m.refused("write a chunk into "+v.place, v.place+".evil.0", false)
		m.refused("read a body in "+v.place, direct+v.chunk, false)
		m.refused("read the last body in "+v.place, direct+v.place+".>", false)
	}
	w1, _ := strings.CutPrefix(victims[2].chunk, store.ToWorkerPlace("w1"))
	m.refused("read a body sent to w1 through a wildcard for the worker", direct+"formica.transfers.to.*"+w1, false)
	m.refused("read the last body of every place", direct+"formica.transfers.>", false)
	m.refused("read bodies in batches, by a filter in the request", "$JS.API.DIRECT.GET."+store.TransfersStream, false)
	m.refused("read a body by sequence", "$JS.API.STREAM.MSG.GET."+store.TransfersStream, false)
	m.refused("list the subjects of the bodies", "$JS.API.STREAM.INFO."+store.TransfersStream, false)
	m.refused("purge the bodies, by a filter in the request", "$JS.API.STREAM.PURGE."+store.TransfersStream, false)
	m.refused("delete a body's message by sequence", "$JS.API.STREAM.MSG.DELETE."+store.TransfersStream, false)
	m.refused("reconfigure the transfers stream", "$JS.API.STREAM.UPDATE."+store.TransfersStream, false)
	m.refused("delete the transfers stream", "$JS.API.STREAM.DELETE."+store.TransfersStream, false)
	m.refused("make a stream", "$JS.API.STREAM.CREATE.FORMICA_TRANSFERS_MALLORY", false)

	// Its own place is written, never read: the server answers a direct
	// get on whatever subject the asker names, so it would publish there
	// what the worker wrote (here a heartbeat of w1's). Nor is the place
	// the coordinators send it bodies in written. The stream refuses what
	// headers would have it do beyond: a rollup of every subject (a purge)
	// or of its own, a message scheduled onto w1's body's subject, a TTL
	// keeping it past the stream's age, a counter, a batch.
	js, err := jetstream.New(m.nc)
	if err != nil {
		t.Fatal(err)
	}
	own := store.WorkerPlace("mallory") + "." + uuid.NewString()
	hb := wire.WorkerHeartbeat{ID: "w1", Host: "evil", Slots: 1000, Started: time.Now(), Interval: time.Second}
	if _, err := js.Publish(ctx, own+".0", wire.MustEncode(wire.TypeWorkerHeartbeat, hb)); err != nil {
		t.Fatalf("a worker may write in its own place: %v", err)
	}
	m.refusedDoing("have the server answer w1's heartbeat subject with its own body", direct+own+".0", func() error {
		ask := nats.NewMsg(direct + own + ".0")
		ask.Reply = wire.SubjectWorkerHeartbeat("w1")
		return m.nc.PublishMsg(ask)
	})
	m.refused("write where the coordinators send it bodies", store.ToWorkerPlace("mallory")+".evil.0", false)
	for what, h := range map[string]nats.Header{
		"rollup of the stream":                 {"Nats-Rollup": {"all"}},
		"rollup of its subject":                {"Nats-Rollup": {"sub"}},
		"message scheduled onto w1's body":     {"Nats-Schedule": {"@every 1s"}, "Nats-Schedule-Target": {victims[1].chunk}},
		"message kept past the stream's age":   {"Nats-TTL": {"never"}},
		"message counter over its own subject": {"Nats-Incr": {"+1"}},
		"batch of messages":                    {"Nats-Batch-Id": {"evil"}, "Nats-Batch-Sequence": {"1"}},
	} {
		msg := &nats.Msg{Subject: own + ".1", Header: h, Data: []byte("x")}
		var refused *jetstream.APIError
		if _, err := js.PublishMsg(ctx, msg); !errors.As(err, &refused) {
			t.Errorf("a %s: %v, want the stream's refusal", what, err)
		}
	}
	// A consumer delivering its own chunk onto w1's heartbeat subject: the
	// server would publish it there.
	push, _ := json.Marshal(map[string]any{"stream_name": store.TransfersStream, "config": map[string]any{
		"name": "evil", "deliver_subject": wire.SubjectWorkerHeartbeat("w1"), "filter_subject": own + ".0", "ack_policy": "none"}})
	m.refusedPublish("deliver its own chunk as a heartbeat of w1's", "$JS.API.CONSUMER.CREATE."+store.TransfersStream+".evil", push)
	m.refusedPublish("the same with the filter in the subject", "$JS.API.CONSUMER.CREATE."+store.TransfersStream+".evil."+own+".0", push)

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
		if err != nil || reply.Header.Get(wire.HeaderType) != "error" || !strings.Contains(string(reply.Data), "sender's place") {
			t.Errorf("spawn naming %s: %v, reply %q", v.ref, err, replyText(reply))
		}
	}
	result := nats.NewMsg(placed.Reply)
	result.Header.Set(wire.HeaderType, string(wire.TypeExecResult))
	result.Header.Set("Formica-Payload", victims[1].ref)
	if err := m.nc.PublishMsg(result); err != nil {
		t.Fatal(err)
	}
	if r := c.waitFinal(bait); r.Status != event.Failed || !strings.Contains(r.Error, "sender's place") {
		t.Errorf("bait run whose result named w1's body: %s (%s), want failed for it", r.Status, r.Error)
	}
	transfers, err := cjs.Stream(ctx, store.TransfersStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range victims {
		msg, err := transfers.GetLastMsgForSubject(ctx, v.chunk)
		if err != nil || !strings.HasPrefix(string(msg.Data), "a body of "+v.place) {
			t.Errorf("the body %s after the attacks: %v", v.ref, err)
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
