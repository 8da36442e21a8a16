package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLeaseTakeOver: a coordinator holds a run's lease and renews it; a
// watcher sees it; taking it over at a stale revision does nothing, at the
// current one ends the lease and gives the submission back to the queue at
// once (far within AckWait), and the former holder's next renewal and its
// release fail with ErrLeaseLost.
func TestLeaseTakeOver(t *testing.T) {
	s, _ := openStore(t, Config{AckWait: time.Hour})
	ctx := ctxT(t, 20*time.Second)
	if _, err := s.Enqueue(ctx, submit("run-1")); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch, err := s.WatchLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.HoldLease(ctx, "run-1", Lease{Coordinator: "c1", Incarnation: "i1", Attempt: 1, Ack: sub.AckSubject()})
	if err != nil {
		t.Fatal(err)
	}
	first := nextLease(t, watch)
	if err := held.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := nextLease(t, watch)
	if first.Run != "run-1" || first.Lease.Coordinator != "c1" || first.Lease.Attempt != 1 || renewed.Rev <= first.Rev {
		t.Fatalf("watched %+v then %+v", first, renewed)
	}
	if taken, err := s.TakeOver(ctx, first); taken || err != nil {
		t.Fatalf("take over at a stale revision: %v, %v", taken, err)
	}
	if taken, err := s.TakeOver(ctx, renewed); !taken || err != nil {
		t.Fatalf("take over: %v, %v", taken, err)
	}
	if gone := nextLease(t, watch); !gone.Gone || gone.Run != "run-1" {
		t.Fatalf("watched %+v after the takeover, want the lease gone", gone)
	}
	again, err := s.Next(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatalf("the submission was not given back: %v", err)
	}
	if again.Sub.RunID != "run-1" || again.Delivered() != 2 {
		t.Fatalf("delivered %s, delivery %d", again.Sub.RunID, again.Delivered())
	}
	if err := held.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renewal after the takeover: %v, want ErrLeaseLost", err)
	}
	if err := held.Release(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release after the takeover: %v, want ErrLeaseLost", err)
	}
	// The new holder's lease stands over a stale holder's.
	next, err := s.HoldLease(ctx, "run-1", Lease{Coordinator: "c2", Attempt: 2, Ack: again.AckSubject()})
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale renewal over a new holder: %v, want ErrLeaseLost", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// nextLease is the next change the watch reports.
func nextLease(t *testing.T, ch <-chan LeaseEntry) LeaseEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("the lease watch ended")
		}
		return e
	case <-ctx.Done():
		t.Fatal("no lease change within 10s")
	}
	return LeaseEntry{}
}
