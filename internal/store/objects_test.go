package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestReadObjectByDirectGets: an object of several chunks reads back whole
// without a consumer; one whose info lies about its size, chunk count or
// digest is refused, and one whose chunks are gone is not found.
func TestReadObjectByDirectGets(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	data := make([]byte, 600<<10) // five chunks of the object store's 128 KiB
	_, _ = rand.Read(data)
	info, err := s.payloads.PutBytes(ctx, "big", data)
	if err != nil {
		t.Fatal(err)
	}
	if info.Chunks < 2 {
		t.Fatalf("%d chunks, want several", info.Chunks)
	}
	got, err := s.readObject(ctx, s.payloads, PayloadsBucket, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v; want the %d put", len(got), err, len(data))
	}

	// A forged info over the same chunks: the last meta message wins.
	meta := "$O." + PayloadsBucket + ".M." + base64.URLEncoding.EncodeToString([]byte("big"))
	for name, lie := range map[string]func(*jetstream.ObjectInfo){
		"size":   func(i *jetstream.ObjectInfo) { i.Size-- },
		"chunks": func(i *jetstream.ObjectInfo) { i.Chunks++ },
		"digest": func(i *jetstream.ObjectInfo) { i.Digest = "SHA-256=" + "AAAA" },
	} {
		forged := *info
		lie(&forged)
		body, _ := json.Marshal(forged)
		m := nats.NewMsg(meta)
		m.Data = body
		m.Header.Set("Nats-Rollup", "sub")
		if _, err := s.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		if got, err := s.readObject(ctx, s.payloads, PayloadsBucket, "big"); err == nil {
			t.Errorf("info lying about its %s: read %d bytes", name, len(got))
		}
	}
	if err := s.payloads.Delete(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.readObject(ctx, s.payloads, PayloadsBucket, "big"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("a deleted object: %v, want not found", err)
	}
}

// BenchmarkReadObject reads a body of five chunks back from a real server.
func BenchmarkReadObject(b *testing.B) {
	s, _ := openStore(b, Config{})
	ctx := context.Background()
	data := make([]byte, 600<<10)
	_, _ = rand.Read(data)
	if _, err := s.payloads.PutBytes(ctx, "big", data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.readObject(ctx, s.payloads, PayloadsBucket, "big"); err != nil {
			b.Fatal(err)
		}
	}
}
