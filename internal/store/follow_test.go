package store

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// copyOf is the copy a stream republishes of the message it stored at
// seq on subject, after prev on the same subject.
func copyOf(subject string, seq, prev uint64, data []byte) *nats.Msg {
	m := nats.NewMsg("formica.stored.test")
	m.Header.Set(jetstream.SubjectHeader, subject)
	m.Header.Set(jetstream.SequenceHeader, strconv.FormatUint(seq, 10))
	m.Header.Set(jetstream.LastSequenceHeader, strconv.FormatUint(prev, 10))
	m.Data = data
	return m
}

// TestFollowReadsMissedCopies: a copy that shows others were missed
// before it (lost to a reconnect, say) makes the follower read them, and
// it, from the stream, in order; a copy of what was read already is
// skipped; a copy right after the last message is taken as it is. On
// one subject the copy's previous sequence there shows the gap, on the
// whole stream any skipped sequence does.
func TestFollowReadsMissedCopies(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 15*time.Second)
	ev := event.Event{Type: event.RunStarted, RunID: "run-a"}
	var seqs []uint64
	for range 3 {
		appendEvents(t, s, "run-a", ev)
		appendEvents(t, s, "run-b", ev) // another run's, between them
		last, err := s.LastEventID(ctx, "run-a")
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, last/EventsPerBatch)
	}
	var got []uint64
	f := &follower{s: s, stream: EventsStream, filter: SubjectEventLog("run-a"), last: seqs[0],
		deliver: func(m *storedMsg) (bool, error) { got = append(got, m.seq); return false, nil }}

	// The copy of the third batch names the second, which never came.
	if _, err := f.copy(ctx, copyOf(SubjectEventLog("run-a"), seqs[2], seqs[1], []byte("copy"))); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(seqs[1:], got); d != "" {
		t.Fatalf("delivered (-want +got)\n%s", d)
	}
	// Its copy again, late: read already.
	f.copy(ctx, copyOf(SubjectEventLog("run-a"), seqs[2], seqs[1], []byte("copy")))
	// The next one, with nothing missed: taken from the copy.
	next := seqs[2] + 5
	var data []byte
	f.deliver = func(m *storedMsg) (bool, error) { got, data = append(got, m.seq), m.data; return false, nil }
	f.copy(ctx, copyOf(SubjectEventLog("run-a"), next, seqs[2], []byte("copy")))
	if d := cmp.Diff(append(seqs[1:], next), got); d != "" || string(data) != "copy" {
		t.Fatalf("delivered (-want +got)\n%s\nlast from %q", d, data)
	}

	// A whole bucket: a copy past the next sequence shows a gap.
	for _, id := range []string{"a1", "a2", "a3"} {
		if err := s.PutApproval(ctx, Approval{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	w := &follower{s: s, stream: kvStream(ApprovalsBucket), filter: kvSubject(ApprovalsBucket, ">"), whole: true, last: 1,
		deliver: func(m *storedMsg) (bool, error) { keys = append(keys, kvKey(ApprovalsBucket, m)); return false, nil }}
	w.copy(ctx, copyOf(kvSubject(ApprovalsBucket, "a3"), 3, 0, nil))
	if d := cmp.Diff([]string{"a2", "a3"}, keys); d != "" {
		t.Fatalf("approvals delivered (-want +got)\n%s", d)
	}
}

// TestOpenRepublishesExistingStores: a store made before the streams
// republished (no RePublish on the events stream and the buckets, no
// direct gets of the events) gets both from the next coordinators' Open,
// several at once, and keeps what it held; its runs are followed without
// a consumer.
func TestOpenRepublishesExistingStores(t *testing.T) {
	srv := brokertest.Start(t)
	ctx := ctxT(t, 30*time.Second)
	js, _ := jetstream.New(connect(t, srv))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: EventsStream, Subjects: []string{SubjectEventLogAll},
		MaxAge: DefaultEventsMaxAge, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	runs, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: RunsBucket, History: 1, TTL: DefaultRetention,
		Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Put(ctx, "old", []byte(`{"run_id":"old","status":"queued"}`)); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	stores := make([]*Store, 3)
	for i := range stores {
		nc := connect(t, srv)
		wg.Go(func() {
			var err error
			if stores[i], err = Open(ctx, nc, Config{}); err != nil {
				t.Errorf("Open: %v", err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	s := stores[0]
	for name, tree := range map[string]string{EventsStream: storedEvents, kvStream(RunsBucket): storedRuns, kvStream(ApprovalsBucket): storedApprovals} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.CachedInfo().Config; c.RePublish == nil || c.RePublish.Destination != tree+".>" || !c.AllowDirect {
			t.Errorf("%s: republish %+v, direct gets %v; want to %s.>, on", name, c.RePublish, c.AllowDirect, tree)
		}
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.WatchRecord(wctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.Status != record.Queued {
		t.Fatalf("the record kept: %+v", r)
	}
	if _, err := s.UpdateRecord(ctx, "old", func(r *record.Run) error { r.Status = event.Running; return nil }); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.Status != event.Running {
		t.Fatalf("update: %+v", r)
	}
	st, err := js.Stream(ctx, kvStream(RunsBucket))
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n != 0 {
		t.Errorf("%d consumers on the records bucket while it is watched, want 0", n)
	}
}
