package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

func TestListPagesWithACursor(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	for i := range 7 {
		st := event.Succeeded
		if i%2 == 1 {
			st = event.Failed
		}
		if _, err := s.CreateRecord(ctx, record.Run{RunID: fmt.Sprintf("r%d", i), Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	pages := func(opts ListOptions) [][]string {
		var out [][]string
		for range 10 {
			p, err := s.ListPage(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range p.Runs {
				ids = append(ids, r.RunID)
			}
			out = append(out, ids)
			if p.Next == "" {
				return out
			}
			opts.Page = p.Next
		}
		t.Fatal("pages never ended")
		return nil
	}
	want := [][]string{{"r6", "r5", "r4"}, {"r3", "r2", "r1"}, {"r0"}}
	if d := cmp.Diff(want, pages(ListOptions{Limit: 3})); d != "" {
		t.Fatalf("pages (-want +got)\n%s", d)
	}
	want = [][]string{{"r5", "r3"}, {"r1"}}
	if d := cmp.Diff(want, pages(ListOptions{Limit: 2, Status: event.Failed})); d != "" {
		t.Fatalf("failed pages (-want +got)\n%s", d)
	}
	for _, bad := range []string{"x", "0", "-1"} {
		if _, err := s.ListPage(ctx, ListOptions{Page: bad}); !errors.Is(err, ErrBadCursor) {
			t.Fatalf("cursor %q: %v", bad, err)
		}
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRecordsPastRetentionAreGone keeps records, approvals and payload
// objects for a second: then they, and their place in the run list, are gone.
func TestRecordsPastRetentionAreGone(t *testing.T) {
	s, _ := openStore(t, Config{Retention: time.Second})
	ctx := ctxT(t, 2*time.Minute)
	if _, err := s.CreateRecord(ctx, record.Run{RunID: "old", Status: event.Succeeded}); err != nil {
		t.Fatal(err)
	}
	ref, err := s.PutPayload(ctx, "", []byte("a large result nobody fetched"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second) // a loaded machine delays expiry
	for {
		_, _, gerr := s.GetRecord(ctx, "old")
		_, perr := s.GetPayload(ctx, CoordinatorsPlace, ref)
		if errors.Is(gerr, ErrNotFound) && perr != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s: record %v, payload %v", gerr, perr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p, err := s.ListPage(ctx, ListOptions{}); err != nil || len(p.Runs) != 0 {
		t.Fatalf("list after retention: %v %v", p.Runs, err)
	}
}
