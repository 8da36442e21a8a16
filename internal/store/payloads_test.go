package store

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker/brokertest"
)

func TestPayloadRoundTrip(t *testing.T) {
	s, nc := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)
	if int64(len(data)) <= nc.MaxPayload() {
		t.Fatalf("test payload %d bytes fits one message (max %d)", len(data), nc.MaxPayload())
	}
	off := s
	ref, err := off.PutPayload(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, TransfersBucket+"/") {
		t.Fatalf("a coordinator's reference %q is not in the coordinators' bucket", ref)
	}
	got, err := off.GetPayload(ctx, TransfersBucket, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes back, not the %d put", len(got), len(data))
	}
	empty, err := s.PutPayload(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetPayload(ctx, TransfersBucket, empty); err != nil || len(got) != 0 {
		t.Fatalf("empty payload: %d bytes, %v", len(got), err)
	}
	if err := s.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPayload(ctx, TransfersBucket, ref); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.DeletePayload(ctx, ref); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	missing := TransfersBucket + "/00000000-0000-4000-8000-000000000000." + strings.Repeat("ab", 32)
	if err := s.DeletePayload(ctx, missing); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	// A reference names only a payload its message created: never a run
	// record's object, never anything but "<transfers bucket>/<id>.<sha256>".
	for _, bad := range []string{"records/run-1/0b9e0c57-0d54-4a43-9d1c-1c2f3b7e6a10", "payloads/x", "payloads/../records/r",
		PayloadsBucket + "/00000000-0000-4000-8000-000000000000." + strings.Repeat("ab", 32),
		"formica_transfers_w_/00000000-0000-4000-8000-000000000000." + strings.Repeat("ab", 32)} {
		if _, err := s.GetPayload(ctx, TransfersBucket, bad); err == nil {
			t.Errorf("GetPayload(%q) succeeded", bad)
		}
		if err := s.DeletePayload(ctx, bad); err == nil {
			t.Errorf("DeletePayload(%q) succeeded", bad)
		}
	}
}

func TestWorkerTransfersNames(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"gpu-1", "gpu_1", "gpu_5f1", "w1", "W1", "ü", "a:b", "a/b"} {
		b := WorkerTransfers(id)
		if !isWorkerTransfers(b) || strings.ContainsFunc(b, func(r rune) bool {
			return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) {
			t.Errorf("WorkerTransfers(%q) = %q: not a bucket name", id, b)
		}
		if other, ok := seen[b]; ok {
			t.Errorf("workers %q and %q share bucket %q", id, other, b)
		}
		seen[b] = id
	}
	if got := WorkerTransfers("gpu-1"); got != "formica_transfers_w_gpu-1" {
		t.Errorf("WorkerTransfers(gpu-1) = %q", got)
	}
}

// TestTransfersArePerParty: a worker writes into its own bucket, made by a
// coordinator (before that its puts fail), where the coordinators write
// what they send it; each reader takes a reference only in the bucket its
// sender writes to it; a worker deletes only in its own bucket, a
// coordinator anywhere; a client writes none.
func TestTransfersArePerParty(t *testing.T) {
	srv := brokertest.Start(t)
	ctx := ctxT(t, 30*time.Second)
	w1, err := OpenTransfers(ctx, connect(t, srv), "w1", Config{})
	if err != nil {
		t.Fatalf("OpenTransfers before any coordinator: %v", err)
	}
	if _, err := w1.PutPayload(ctx, "", []byte("early")); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("PutPayload without a bucket: %v, want ErrBucketNotFound", err)
	}
	c, err := Open(ctx, connect(t, srv), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w1.PutPayload(ctx, "", []byte("still early")); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("PutPayload before w1 joined: %v, want ErrBucketNotFound", err)
	}
	for _, id := range []string{"w1", "w2", "w1"} { // idempotent
		if err := c.OpenWorkerTransfers(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	w2, err := OpenTransfers(ctx, connect(t, srv), "w2", Config{})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("late"), 1<<19)
	ref, err := w1.PutPayload(ctx, "", data)
	if err != nil {
		t.Fatalf("PutPayload once the coordinator made the bucket: %v", err)
	}
	if !strings.HasPrefix(ref, WorkerTransfers("w1")+"/") {
		t.Fatalf("w1's reference %q is not in its bucket", ref)
	}
	// Only as w1's: not as the coordinators', not as w2's.
	for _, from := range []string{TransfersBucket, WorkerTransfers("w2"), ""} {
		if _, err := c.GetPayload(ctx, from, ref); !errors.Is(err, ErrForeignRef) {
			t.Errorf("w1's reference read as sent by %q: %v, want ErrForeignRef", from, err)
		}
	}
	if got, err := c.GetPayload(ctx, WorkerTransfers("w1"), ref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("coordinator reads w1's body: %d bytes, %v", len(got), err)
	}
	// w2 may not delete it; w1 may, and so may a coordinator.
	if err := w2.DeletePayload(ctx, ref); !errors.Is(err, ErrForeignRef) {
		t.Fatalf("w2 deletes w1's body: %v, want ErrForeignRef", err)
	}
	if _, err := c.GetPayload(ctx, WorkerTransfers("w1"), ref); err != nil {
		t.Fatalf("w1's body after w2's delete: %v", err)
	}
	if err := w1.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetPayload(ctx, WorkerTransfers("w1"), ref); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetPayload after delete: %v", err)
	}
	ref2, err := w2.PutPayload(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePayload(ctx, ref2); err != nil {
		t.Fatalf("coordinator deletes a body sent to it: %v", err)
	}
	// What a coordinator sends w1 goes into w1's bucket: w1 reads it as
	// sent to it and may drop it; w2 may not drop it.
	sent, err := c.PutPayload(ctx, WorkerTransfers("w1"), data)
	if err != nil || !strings.HasPrefix(sent, WorkerTransfers("w1")+"/") {
		t.Fatalf("coordinator's body for w1: %q, %v", sent, err)
	}
	if err := w2.DeletePayload(ctx, sent); !errors.Is(err, ErrForeignRef) {
		t.Fatalf("w2 deletes a body sent to w1: %v, want ErrForeignRef", err)
	}
	if got, err := w1.GetPayload(ctx, WorkerTransfers("w1"), sent); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("w1 reads the body sent to it: %d bytes, %v", len(got), err)
	}
	if err := w1.DeletePayload(ctx, sent); err != nil {
		t.Fatalf("w1 drops the body sent to it: %v", err)
	}
	// A worker writes into no bucket but its own.
	if _, err := w1.PutPayload(ctx, WorkerTransfers("w2"), data); !errors.Is(err, ErrForeignRef) {
		t.Fatalf("w1 writes into w2's bucket: %v, want ErrForeignRef", err)
	}
	// The coordinators' own bodies (for clients): deleted only by coordinators.
	cref, err := c.PutPayload(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := w1.DeletePayload(ctx, cref); !errors.Is(err, ErrForeignRef) {
		t.Fatalf("w1 deletes the coordinator's body: %v, want ErrForeignRef", err)
	}
	// A client has no bucket: its bodies must fit one message.
	cl, err := Open(ctx, connect(t, srv), Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutPayload(ctx, "", data); !errors.Is(err, ErrNoTransfers) {
		t.Fatalf("client PutPayload: %v, want ErrNoTransfers", err)
	}
	if got, err := cl.GetPayload(ctx, TransfersBucket, cref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("client reads the coordinator's body: %d bytes, %v", len(got), err)
	}
	if err := cl.DeletePayload(ctx, cref); !errors.Is(err, ErrForeignRef) {
		t.Fatalf("client deletes the coordinator's body: %v, want ErrForeignRef", err)
	}
	if err := w1.OpenWorkerTransfers(ctx, "w3"); err == nil {
		t.Fatal("a worker's store made a bucket")
	}
}
