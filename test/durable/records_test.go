package durable_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// TestRecordsOnlyThroughTheCoordinator replays, with a client's credentials
// over TCP, writes that would forge a run's outcome or slip work past the
// coordinator: a succeeded record put in the records bucket (a core publish
// and a JetStream KV put), the record deleted and purged, a submission
// published straight into the queue and the run index, and the client's
// own cancel request republished onto the record through a consumer. The
// server refuses each; the coordinator refuses a submission past its
// ceilings and a direct run whose approver is the record's subject. The
// targeted run, held at an approval meanwhile, still finishes with its real
// output once `formica approve` answers, nothing else was queued, and every
// process stays up.
func TestRecordsOnlyThroughTheCoordinator(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{approvalTimeout: "2m"})
	w1 := c.startWorker("w1", 8)
	script, _ := approvalScript(t, "rec")
	run := c.submit(map[string]any{"task": "root-rec", "model": "scripted:" + script})
	held := c.waitApproval(run)

	e := c.attacker(c.creds("client", "eve"), "_FORMICA.client.eve")
	forged, _ := json.Marshal(record.Run{RunID: run, Status: event.Succeeded, Task: "root-rec", Output: "HIJACKED",
		Attempts: 1, CreatedAt: time.Now(), FinishedAt: time.Now()})
	key := "$KV." + store.RunsBucket + "." + run
	e.refusedPublish("write a succeeded record", key, forged)
	del := nats.NewMsg(key)
	del.Header.Set("KV-Operation", "DEL")
	e.refusedDoing("delete the record", key, func() error { return e.nc.PublishMsg(del) })
	purge := nats.NewMsg(key)
	purge.Header.Set("KV-Operation", "PURGE")
	purge.Header.Set("Nats-Rollup", "sub")
	e.refusedDoing("purge the record", key, func() error { return e.nc.PublishMsg(purge) })
	e.refusedPublish("delete the record's message", "$JS.API.STREAM.MSG.DELETE.KV_"+store.RunsBucket, []byte(`{"seq":1}`))

	sub := wire.RunSubmit{RunID: "forged-1", Task: "Plan:\n- x", Agent: spec.Agent{Name: "formica", Model: "sim"}}
	e.refusedPublish("publish a submission into the queue", store.SubjectQueue, wire.MustEncode(wire.TypeRunSubmit, sub))
	e.refusedPublish("add a run to the index", store.SubjectIndex, []byte(`{"run_id":"forged-1"}`))

	// The one stream a client writes cannot be read back through a
	// consumer delivering onto the record's subject.
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, store.SubjectCancel("decoy-1"), forged); err != nil {
		t.Fatalf("a client appends to the cancel requests: %v", err)
	}
	push, _ := json.Marshal(map[string]any{"stream_name": store.CancelsStream, "config": map[string]any{
		"name": "evil", "deliver_subject": key, "filter_subject": store.SubjectCancel("decoy-1"), "ack_policy": "none"}})
	e.refusedPublish("republish a cancel request onto the record", "$JS.API.CONSUMER.CREATE."+store.CancelsStream+".evil", push)

	kv, err := js.KeyValue(ctx, store.RunsBucket)
	if err != nil {
		t.Fatalf("a client may read the records bucket: %v", err)
	}
	for what, op := range map[string]func(context.Context) error{
		"KV put":    func(ctx context.Context) error { _, err := kv.Put(ctx, run, forged); return err },
		"KV delete": func(ctx context.Context) error { return kv.Delete(ctx, run) },
		"KV purge":  func(ctx context.Context) error { return kv.Purge(ctx, run) },
	} {
		octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
		if err := op(octx); err == nil {
			t.Errorf("a client's %s of record %s succeeded", what, run)
		}
		ocancel()
	}
	jctx, jcancel := context.WithTimeout(ctx, 3*time.Second)
	if _, err := js.Publish(jctx, store.SubjectQueue, wire.MustEncode(wire.TypeRunSubmit, sub)); err == nil {
		t.Error("a client's JetStream publish into the queue succeeded")
	}
	jcancel()

	// Asked of the coordinator instead, it checks against its own
	// ceilings, and names no approver outside a client's inbox.
	wide := sub
	wide.Limits.MaxThreads = 100_000
	reply, err := e.nc.Request(wire.SubjectEnqueue, wire.MustEncode(wire.TypeRunSubmit, wide), 10*time.Second)
	if err != nil || reply.Header.Get("Formica-Error") != string(wire.CodeBadRequest) {
		t.Errorf("enqueue past the ceilings: %v, reply %q", err, replyText(reply))
	}
	direct := sub
	direct.RunID, direct.Approver = "forged-2", key
	reply, err = e.nc.Request(wire.SubjectSubmit, wire.MustEncode(wire.TypeRunSubmit, direct), 10*time.Second)
	if err != nil || reply.Header.Get("Formica-Error") != string(wire.CodeBadRequest) {
		t.Errorf("a direct run answered on the record's subject: %v, reply %q", err, replyText(reply))
	}

	entry, err := kv.Get(ctx, run)
	if err != nil {
		t.Fatalf("read record %s back: %v", run, err)
	}
	var stored record.Run
	if err := json.Unmarshal(entry.Value(), &stored); err != nil || stored.Status != event.Running || stored.Output != "" {
		t.Errorf("record %s after the forged writes: %s %q (%v), want running", run, stored.Status, stored.Output, err)
	}
	if rec := c.record(run); rec.Status != event.Running {
		t.Errorf("run %s is %s while its approval waits", run, rec.Status)
	}

	if r := c.cli("approve", held.ID, "--allow"); r.code != 0 {
		t.Fatalf("formica approve %s --allow: exit %d: %s", held.ID, r.code, r.stderr)
	}
	if rec := c.waitFinal(run); rec.Status != event.Succeeded || rec.Output != "root finished" || len(rec.Threads) != 4 {
		t.Errorf("run %s: %s (%s), %d threads, output %q", run, rec.Status, rec.Error, len(rec.Threads), rec.Output)
	}
	if data, err := os.ReadFile(filepath.Join(c.cwd, "out-rec.txt")); err != nil || string(data) != "written by c (rec)" {
		t.Errorf("the approved write_file: %q, %v", data, err)
	}
	var got struct {
		RunID string `json:"run_id"`
	}
	r := c.cli("get", run, "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.RunID != run {
		t.Errorf("formica get %s: exit %d %s", run, r.code, r.stderr)
	}
	for _, id := range []string{"forged-1", "forged-2"} {
		if code := c.getJSON("/v1/runs/"+id, nil); code != http.StatusNotFound {
			t.Errorf("GET /v1/runs/%s: %d, want 404: nothing else was queued or run", id, code)
		}
	}
	// One submission ever entered the queue, and one run the index.
	for _, name := range []string{store.QueueStream, store.IndexStream} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if n := st.CachedInfo().State.LastSeq; n != 1 {
			t.Errorf("stream %s has had %d messages, want 1 (the target's)", name, n)
		}
	}
	if c.p.Exited() || w1.Exited() {
		t.Errorf("coordinator %s, worker %s", c.p.Status(), w1.Status())
	}
}
