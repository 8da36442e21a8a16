package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
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
	ref, err := s.PutPayload(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseRef(ref)
	if err != nil || r.place != CoordinatorsPlace || r.chunks < chunkWindow+1 {
		t.Fatalf("a coordinator's reference %q: %+v, %v; want the coordinators' place and more chunks than one window", ref, r, err)
	}
	got, err := s.GetPayload(ctx, CoordinatorsPlace, ref)
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
	if got, err := s.GetPayload(ctx, CoordinatorsPlace, empty); err != nil || len(got) != 0 {
		t.Fatalf("empty payload: %d bytes, %v", len(got), err)
	}
	if err := s.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPayload(ctx, CoordinatorsPlace, ref); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.DeletePayload(ctx, ref); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	sum := strings.Repeat("ab", 32)
	missing := CoordinatorsPlace + "/00000000-0000-4000-8000-000000000000." + sum + ".3"
	if err := s.DeletePayload(ctx, missing); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	if _, err := s.GetPayload(ctx, CoordinatorsPlace, missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read missing: %v", err)
	}
	// A reference names only a body its message created: never a run
	// record's object, never anything but "<place>/<id>.<sha256>.<chunks>".
	id := "00000000-0000-4000-8000-000000000000"
	for _, bad := range []string{"records/run-1/0b9e0c57-0d54-4a43-9d1c-1c2f3b7e6a10", "payloads/x", "payloads/../records/r",
		PayloadsBucket + "/" + id + "." + sum,
		"formica_transfers_w_/" + id + "." + sum,
		WorkerPlace("") + "/" + id + "." + sum + ".1",
		WorkerPlace("a.b") + "/" + id + "." + sum + ".1",
		WorkerPlace("*") + "/" + id + "." + sum + ".1",
		ToWorkerPlace("") + "/" + id + "." + sum + ".1",
		"formica.transfers.x/" + id + "." + sum + ".1",
		"formica.transfers.>/" + id + "." + sum + ".1",
		CoordinatorsPlace + "/" + id + "." + sum,
		CoordinatorsPlace + "/" + id + "." + sum + ".01",
		CoordinatorsPlace + "/" + id + "." + sum + ".-1",
		CoordinatorsPlace + "/" + id + "." + strings.ToUpper(sum) + ".1",
		CoordinatorsPlace + "/" + id + ".*." + sum + ".1",
		CoordinatorsPlace + "/*." + sum + ".1",
	} {
		if _, err := s.GetPayload(ctx, CoordinatorsPlace, bad); err == nil {
			t.Errorf("GetPayload(%q) succeeded", bad)
		}
		if err := s.DeletePayload(ctx, bad); err == nil {
			t.Errorf("DeletePayload(%q) succeeded", bad)
		}
	}
}

// TestPayloadBoundToItsContent: a body one of whose chunks was written
// again (as its owner may) is refused, as is one missing a chunk.
func TestPayloadBoundToItsContent(t *testing.T) {
	s, nc := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	data := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16)
	for name, spoil := range map[string]func(r payloadRef){
		"a chunk written again": func(r payloadRef) {
			if _, err := s.js.Publish(ctx, r.chunk(1), []byte("something else")); err != nil {
				t.Fatal(err)
			}
		},
		"a chunk gone": func(r payloadRef) {
			if err := s.transfers.Purge(ctx, jetstream.WithPurgeSubject(r.chunk(2))); err != nil {
				t.Fatal(err)
			}
		},
		"a chunk too many": func(r payloadRef) {
			if _, err := s.js.Publish(ctx, r.chunk(r.chunks), []byte("more")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		ref, err := s.PutPayload(ctx, "", data)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := parseRef(ref)
		if r.chunks < 3 {
			t.Fatalf("%d chunks of %d bytes (max payload %d)", r.chunks, len(data), nc.MaxPayload())
		}
		spoil(r)
		got, err := s.GetPayload(ctx, CoordinatorsPlace, ref)
		switch {
		case name == "a chunk too many":
			// Past its count nothing is read: the body is whole.
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: %d bytes, %v", name, len(got), err)
			}
		case err == nil:
			t.Errorf("%s: read %d bytes", name, len(got))
		}
		// Its reference with another count, or another digest: refused.
		for _, other := range []payloadRef{{place: r.place, id: r.id, sum: r.sum, chunks: r.chunks - 1}, {place: r.place, id: r.id, sum: strings.Repeat("0", 64), chunks: r.chunks}} {
			if got, err := s.GetPayload(ctx, CoordinatorsPlace, other.String()); err == nil {
				t.Errorf("%s: %s read %d bytes", name, other, len(got))
			}
		}
	}
}

func TestPlaces(t *testing.T) {
	for _, id := range []string{"gpu-1", "gpu_1", "w1", "W1", "ü", "a:b", "a/b", "coord"} {
		from, to := WorkerPlace(id), ToWorkerPlace(id)
		if !isPlace(from) || !isPlace(to) || from == to || from == CoordinatorsPlace || to == CoordinatorsPlace {
			t.Errorf("worker %q: places %q and %q", id, from, to)
		}
	}
	for _, p := range []string{"", "formica.transfers", "formica.transfers.from", "formica.transfers.from.", "formica.transfers.from.a.b",
		"formica.transfers.to.*", "formica.transfers.from.>", "formica.transfers.coord.x", "formica.transfers.x"} {
		if isPlace(p) {
			t.Errorf("%q is a place", p)
		}
	}
	// Each worker's bucket of earlier versions: distinct ids, distinct
	// buckets, as those versions named them.
	seen := map[string]string{}
	for _, id := range []string{"gpu-1", "gpu_1", "gpu_5f1", "w1", "W1", "ü", "a:b", "a/b"} {
		b := legacyBucketOf(WorkerPlace(id))
		if !isLegacyBucket(b) || seen[b] != "" {
			t.Errorf("legacyBucketOf(%q) = %q: not a bucket, or another's (%q)", id, b, seen[b])
		}
		seen[b] = id
	}
	if got := legacyBucketOf(WorkerPlace("gpu-1")); got != "formica_transfers_w_gpu-1" {
		t.Errorf("the bucket of gpu-1 was %q", got)
	}
	if got := legacyBucketOf(CoordinatorsPlace); got != "formica_transfers" {
		t.Errorf("the coordinators' bucket was %q", got)
	}
}

// TestTransfersArePerParty: a worker writes into its own place (once a
// coordinator made the stream; before that its puts fail), and reads what
// the coordinators write for it in another; each reader takes a reference
// only in the place its sender writes to it; only a coordinator deletes;
// a client writes none.
func TestTransfersArePerParty(t *testing.T) {
	srv := brokertest.Start(t)
	ctx := ctxT(t, 30*time.Second)
	w1, err := OpenTransfers(ctx, connect(t, srv), "w1", Config{})
	if err != nil {
		t.Fatalf("OpenTransfers before any coordinator: %v", err)
	}
	if _, err := w1.PutPayload(ctx, "", []byte("early")); err == nil {
		t.Fatal("PutPayload with no stream succeeded")
	}
	c, err := Open(ctx, connect(t, srv), Config{})
	if err != nil {
		t.Fatal(err)
	}
	w2, err := OpenTransfers(ctx, connect(t, srv), "w2", Config{})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("late"), 1<<19)
	ref, err := w1.PutPayload(ctx, "", data)
	if err != nil {
		t.Fatalf("PutPayload once a coordinator made the stream: %v", err)
	}
	if !strings.HasPrefix(ref, WorkerPlace("w1")+"/") {
		t.Fatalf("w1's reference %q is not in its place", ref)
	}
	// Only as w1's: not as the coordinators', not as w2's, not as sent to w1.
	for _, from := range []string{CoordinatorsPlace, WorkerPlace("w2"), ToWorkerPlace("w1"), ""} {
		if _, err := c.GetPayload(ctx, from, ref); !errors.Is(err, ErrForeignRef) {
			t.Errorf("w1's reference read as sent by %q: %v, want ErrForeignRef", from, err)
		}
	}
	// Nor by a worker, which reads only what it is sent.
	for id, w := range map[string]*Store{"w1": w1, "w2": w2} {
		if _, err := w.GetPayload(ctx, ToWorker(id)(""), ref); !errors.Is(err, ErrForeignRef) {
			t.Errorf("worker %s reads w1's reference: %v, want ErrForeignRef", id, err)
		}
	}
	if got, err := c.GetPayload(ctx, WorkerPlace("w1"), ref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("coordinator reads w1's body: %d bytes, %v", len(got), err)
	}
	// Workers delete nothing, their own bodies included; a coordinator
	// deletes any.
	for _, w := range []*Store{w1, w2} {
		if w.MayDeletePayload(ref) {
			t.Errorf("worker %s may delete w1's body", w.place)
		}
		if err := w.DeletePayload(ctx, ref); !errors.Is(err, ErrForeignRef) {
			t.Fatalf("worker %s deletes w1's body: %v, want ErrForeignRef", w.place, err)
		}
	}
	if _, err := c.GetPayload(ctx, WorkerPlace("w1"), ref); err != nil {
		t.Fatalf("w1's body after the workers' deletes: %v", err)
	}
	if err := c.DeletePayload(ctx, ref); err != nil {
		t.Fatalf("coordinator deletes w1's body: %v", err)
	}
	if _, err := c.GetPayload(ctx, WorkerPlace("w1"), ref); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetPayload after delete: %v", err)
	}
	// What a coordinator sends w1 goes where w1 reads it as sent to it;
	// w2 does not.
	sent, err := c.PutPayload(ctx, ToWorkerPlace("w1"), data)
	if err != nil || !strings.HasPrefix(sent, ToWorkerPlace("w1")+"/") {
		t.Fatalf("coordinator's body for w1: %q, %v", sent, err)
	}
	if got, err := w1.GetPayload(ctx, ToWorker("w1")(""), sent); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("w1 reads the body sent to it: %d bytes, %v", len(got), err)
	}
	if _, err := w2.GetPayload(ctx, ToWorker("w2")(""), sent); !errors.Is(err, ErrForeignRef) {
		t.Fatalf("w2 reads a body sent to w1: %v, want ErrForeignRef", err)
	}
	// A worker writes into no place but its own, a coordinator into no
	// worker's own place, nor a wildcard.
	for _, to := range []string{WorkerPlace("w2"), ToWorkerPlace("w1"), CoordinatorsPlace} {
		if _, err := w1.PutPayload(ctx, to, data); !errors.Is(err, ErrForeignRef) {
			t.Fatalf("w1 writes into %s: %v, want ErrForeignRef", to, err)
		}
	}
	for _, to := range []string{WorkerPlace("w1"), "formica.transfers.to.*"} {
		if _, err := c.PutPayload(ctx, to, data); !errors.Is(err, ErrForeignRef) {
			t.Fatalf("coordinator writes into %s: %v, want ErrForeignRef", to, err)
		}
	}
	// A client has no place: its bodies must fit one message. It reads
	// what the coordinators send it.
	cref, err := c.PutPayload(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := Open(ctx, connect(t, srv), Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutPayload(ctx, "", data); !errors.Is(err, ErrNoTransfers) {
		t.Fatalf("client PutPayload: %v, want ErrNoTransfers", err)
	}
	if got, err := cl.GetPayload(ctx, CoordinatorsPlace, cref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("client reads the coordinator's body: %d bytes, %v", len(got), err)
	}
	if err := cl.DeletePayload(ctx, cref); !errors.Is(err, ErrForeignRef) {
		t.Fatalf("client deletes the coordinator's body: %v, want ErrForeignRef", err)
	}
	if _, _, err := w1.RemoveDrainedTransfers(ctx); err == nil {
		t.Fatal("a worker's store removed buckets")
	}
}

// TestLegacyTransfers: the transfers buckets of earlier versions are read
// for the journal entries that name them, from the bucket each must be in
// and for no message, and removed once no chunk is left in them.
func TestLegacyTransfers(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 30*time.Second)
	bucket := func(name string) jetstream.ObjectStore {
		ob, err := s.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: name})
		if err != nil {
			t.Fatal(err)
		}
		return ob
	}
	put := func(ob jetstream.ObjectStore, data []byte) string {
		sum := sha256.Sum256(data)
		id := uuid.NewString() + "." + hex.EncodeToString(sum[:])
		if _, err := ob.PutBytes(ctx, "payloads/"+id, data); err != nil {
			t.Fatal(err)
		}
		st, _ := ob.Status(ctx)
		return st.Bucket() + "/" + id
	}
	gpu := bucket(legacyBucketOf(WorkerPlace("gpu_1")))
	coords := bucket(legacyBucket)
	bucket(legacyBucketOf(WorkerPlace("gone")))
	data := bytes.Repeat([]byte("old"), 200<<10)
	wref, cref := put(gpu, data), put(coords, []byte("the coordinators'"))
	thread, coord := SubjectJournal("r", "t", false), SubjectJournal("r", "t", true)
	if got, err := s.journalPayload(ctx, thread, wref, WorkerPlace("gpu_1")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("gpu_1's old entry: %d bytes, %v", len(got), err)
	}
	if got, err := s.journalPayload(ctx, coord, cref, CoordinatorsPlace); err != nil || string(got) != "the coordinators'" {
		t.Fatalf("the coordinators' old entry: %q, %v", got, err)
	}
	for _, tc := range []struct{ subject, ref, place string }{
		{thread, wref, WorkerPlace("gpu-1")}, {coord, wref, CoordinatorsPlace}, {thread, cref, WorkerPlace("gpu_1")}, {thread, cref, CoordinatorsPlace},
	} {
		if _, err := s.journalPayload(ctx, tc.subject, tc.ref, tc.place); !errors.Is(err, ErrForeignRef) {
			t.Errorf("%s on %s from %s: %v, want ErrForeignRef", tc.ref, tc.subject, tc.place, err)
		}
	}
	if _, err := s.GetPayload(ctx, WorkerPlace("gpu_1"), wref); !errors.Is(err, ErrForeignRef) {
		t.Errorf("an old reference on a message: %v, want ErrForeignRef", err)
	}
	if s.MayDeletePayload(wref) {
		t.Error("an old reference may be deleted")
	}

	removed, left, err := s.RemoveDrainedTransfers(ctx)
	if err != nil || left != 2 || len(removed) != 1 || removed[0] != legacyBucketOf(WorkerPlace("gone")) {
		t.Fatalf("first sweep removed %v, left %d, %v; want gone's removed, two left", removed, left, err)
	}
	name := "payloads/" + strings.SplitN(wref, "/", 2)[1]
	if err := gpu.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	removed, left, err = s.RemoveDrainedTransfers(ctx)
	if err != nil || left != 1 || len(removed) != 1 || removed[0] != legacyBucketOf(WorkerPlace("gpu_1")) {
		t.Fatalf("second sweep removed %v, left %d, %v; want gpu_1's removed, one left", removed, left, err)
	}
	if _, err := s.journalPayload(ctx, thread, wref, WorkerPlace("gpu_1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an old entry whose bucket is gone: %v, want ErrNotFound", err)
	}
	if _, err := s.js.ObjectStore(ctx, PayloadsBucket); err != nil {
		t.Fatalf("the records' bucket: %v", err)
	}
}
