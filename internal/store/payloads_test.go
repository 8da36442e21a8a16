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
	var off Offloader = s
	ref, err := off.PutPayload(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := off.GetPayload(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes back, not the %d put", len(got), len(data))
	}
	empty, err := s.PutPayload(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetPayload(ctx, empty); err != nil || len(got) != 0 {
		t.Fatalf("empty payload: %d bytes, %v", len(got), err)
	}
	if err := s.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPayload(ctx, ref); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.DeletePayload(ctx, ref); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	missing := "payloads/00000000-0000-4000-8000-000000000000." + strings.Repeat("ab", 32)
	if err := s.DeletePayload(ctx, missing); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	// A reference names only a payload its message created: never a run
	// record's object, never anything but "payloads/<id>.<sha256>".
	for _, bad := range []string{"records/run-1/0b9e0c57-0d54-4a43-9d1c-1c2f3b7e6a10", "payloads/x", "payloads/../records/r"} {
		if _, err := s.GetPayload(ctx, bad); err == nil {
			t.Errorf("GetPayload(%q) succeeded", bad)
		}
		if err := s.DeletePayload(ctx, bad); err == nil {
			t.Errorf("DeletePayload(%q) succeeded", bad)
		}
	}
}

// TestTransfersBeforeTheCoordinator opens a worker's transfers store on a
// JetStream where no coordinator has made the bucket yet (a worker started
// first): the store opens, payload calls fail while the bucket is missing,
// and once a coordinator's store is open the same worker store puts, gets
// and deletes payloads, with no restart.
func TestTransfersBeforeTheCoordinator(t *testing.T) {
	srv := brokertest.Start(t)
	ctx := ctxT(t, 30*time.Second)
	w, err := OpenTransfers(ctx, connect(t, srv), Config{})
	if err != nil {
		t.Fatalf("OpenTransfers before any coordinator: %v", err)
	}
	if _, err := w.PutPayload(ctx, []byte("early")); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("PutPayload without a bucket: %v, want ErrBucketNotFound", err)
	}
	if _, err := Open(ctx, connect(t, srv), Config{}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("late"), 1<<19)
	ref, err := w.PutPayload(ctx, data)
	if err != nil {
		t.Fatalf("PutPayload once the coordinator made the bucket: %v", err)
	}
	if got, err := w.GetPayload(ctx, ref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetPayload: %d bytes, %v", len(got), err)
	}
	if err := w.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := w.GetPayload(ctx, ref); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetPayload after delete: %v", err)
	}
}
