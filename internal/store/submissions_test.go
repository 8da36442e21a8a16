package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/wire"
)

// queued is how many submissions wait in the queue stream.
func queued(t *testing.T, s *Store) uint64 {
	t.Helper()
	st, err := s.js.Stream(ctxT(t, 5*time.Second), QueueStream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func submit(id string) wire.RunSubmit {
	return wire.RunSubmit{RunID: id, Task: "task of " + id, Agent: spec.Agent{Name: "root", Model: "sim"}, Cwd: "/w"}
}

func TestEnqueueDeduplicates(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 10*time.Second)
	dup, err := s.Enqueue(ctx, submit("run-1"))
	if err != nil || dup {
		t.Fatalf("first Enqueue: dup=%v err=%v", dup, err)
	}
	dup, err = s.Enqueue(ctx, submit("run-1"))
	if err != nil || !dup {
		t.Fatalf("second Enqueue: dup=%v err=%v, want a duplicate", dup, err)
	}
	if n := queued(t, s); n != 1 {
		t.Fatalf("%d queued messages, want 1", n)
	}
	r, _, err := s.GetRecord(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != record.Queued || r.Task != "task of run-1" || r.Model != "sim" || r.Spec == nil || r.CreatedAt.IsZero() {
		t.Fatalf("queued record: %+v", r)
	}

	// A record that was created but whose publish never happened (a crash
	// between the two) is repaired by enqueueing again.
	if _, err := s.CreateRecord(ctx, record.Run{RunID: "run-2", Status: record.Queued, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if dup, err := s.Enqueue(ctx, submit("run-2")); err != nil || !dup {
		t.Fatalf("repairing Enqueue: dup=%v err=%v", dup, err)
	}
	if n := queued(t, s); n != 2 {
		t.Fatalf("%d queued messages, want 2", n)
	}
	// A run already started is not queued again.
	if _, err := s.UpdateRecord(ctx, "run-2", func(r *record.Run) error { r.Status = "running"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, submit("run-2")); err != nil {
		t.Fatal(err)
	}
	if n := queued(t, s); n != 2 {
		t.Fatalf("%d queued messages, want 2", n)
	}
	// The stream remembers a run id for the DuplicateWindow even after its
	// message was acked and removed: a record left "queued" by a
	// coordinator that failed to update it does not make the run run twice.
	for range 2 {
		sub, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if dup, err := s.Enqueue(ctx, submit("run-1")); err != nil || !dup {
		t.Fatalf("Enqueue after ack: dup=%v err=%v", dup, err)
	}
	if n := queued(t, s); n != 0 {
		t.Fatalf("%d queued messages after the runs were acked, want 0", n)
	}
	if _, err := s.Enqueue(ctx, submit("bad.id")); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("bad id: %v", err)
	}
}

func TestNextAck(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 10*time.Second)
	want := submit("run-1")
	if _, err := s.Enqueue(ctx, want); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, sub.Sub); d != "" {
		t.Fatalf("submission (-want +got)\n%s", d)
	}
	if sub.Delivered() != 1 || sub.LastDelivery() {
		t.Fatalf("delivered %d, last %v", sub.Delivered(), sub.LastDelivery())
	}
	if err := sub.InProgress(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sub.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"ack": sub.Ack(ctx), "nak": sub.Nak(ctx, 0), "term": sub.Term(ctx, "x"), "progress": sub.InProgress(ctx),
	} {
		if !errors.Is(err, ErrSettled) {
			t.Errorf("%s after ack: %v, want ErrSettled", name, err)
		}
	}
	if n := queued(t, s); n != 0 {
		t.Fatalf("%d queued messages after ack, want 0", n)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := s.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an empty queue: %v", err)
	}
}

func TestKeepInProgressHoldsSubmission(t *testing.T) {
	s, _ := openStore(t, Config{AckWait: time.Second})
	ctx := ctxT(t, 15*time.Second)
	if _, err := s.Enqueue(ctx, submit("run-1")); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := s.KeepInProgress(ctx, sub)
	// Well past AckWait: kept in progress, it is not delivered again.
	wait, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if again, err := s.Next(wait); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("redelivered while in progress: %v, %v", again, err)
	}
	stop()
	stop() // safe twice
	if err := sub.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRedeliveryAfterCoordinatorDies(t *testing.T) {
	s, _ := openStore(t, Config{AckWait: time.Second})
	ctx := ctxT(t, 15*time.Second)
	if _, err := s.Enqueue(ctx, submit("run-1")); err != nil {
		t.Fatal(err)
	}
	first, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = first // the coordinator dies: no ack, no progress
	second, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Sub.RunID != "run-1" || second.Delivered() != 2 || second.Sequence() != first.Sequence() {
		t.Fatalf("redelivered %s, delivered %d, seq %d (first seq %d)",
			second.Sub.RunID, second.Delivered(), second.Sequence(), first.Sequence())
	}
	if err := second.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNakAndTerm(t *testing.T) {
	s, _ := openStore(t, Config{MaxDeliver: 2})
	ctx := ctxT(t, 10*time.Second)
	if _, err := s.Enqueue(ctx, submit("run-1")); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Nak(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	sub, err = s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Delivered() != 2 || !sub.LastDelivery() {
		t.Fatalf("after nak: delivered %d, last %v", sub.Delivered(), sub.LastDelivery())
	}
	if err := sub.Term(ctx, "given up"); err != nil {
		t.Fatal(err)
	}
	if n := queued(t, s); n != 0 {
		t.Fatalf("%d queued messages after term, want 0", n)
	}
}

func TestNextTerminatesGarbage(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 10*time.Second)
	garbage := [][]byte{
		[]byte("not msgpack at all"),
		wire.MustEncode(wire.TypeProgress, wire.Progress{}),               // wrong type
		wire.MustEncode(wire.TypeRunSubmit, wire.RunSubmit{RunID: "a.b"}), // unusable run id
	}
	for _, g := range garbage {
		if _, err := s.js.Publish(ctx, SubjectQueue, g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Enqueue(ctx, submit("run-1")); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Sub.RunID != "run-1" {
		t.Fatalf("got %q, want run-1 after the garbage", sub.Sub.RunID)
	}
	if err := sub.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queued(t, s); n != 0 {
		t.Fatalf("%d messages left, want 0 (garbage terminated)", n)
	}
}

// Sequence is the message's sequence in QueueStream.
func (s *Submission) Sequence() uint64 { return s.seq }
