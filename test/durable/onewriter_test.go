package durable_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/store"
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
