package store

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
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
