package store

import (
	"bytes"
	"crypto/rand"
	"errors"
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
	if err := s.DeletePayload(ctx, "payloads/never-was"); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
}
