package store

import (
	"errors"
	"fmt"
	"strings"
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

// Pages over more entries than a window reads, with a filter, deleted
// records, records whose status changed after they were listed in the
// index, and a record too large for one message: every page holds the
// records of its part of the index, newest first, and together the pages
// hold every matching record once.
func TestListPagesOverManyWindows(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 60*time.Second)
	const n = 700
	status := map[string]event.Status{}
	var order []string // newest first
	for i := range n {
		id := fmt.Sprintf("r%03d", i)
		st := event.Succeeded
		if i%5 == 0 {
			st = event.Failed
		}
		r := record.Run{RunID: id, Status: st}
		if i == 333 {
			r.Output = strings.Repeat("x", 2<<20) // held by the object store
		}
		if _, err := s.CreateRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
		status[id] = st
		order = append([]string{id}, order...)
	}
	for _, i := range []int{10, 250, 251, 600} {
		id := fmt.Sprintf("r%03d", i)
		if err := s.DeleteRecord(ctx, id); err != nil {
			t.Fatal(err)
		}
		delete(status, id)
	}
	for _, i := range []int{11, 12, 499} {
		id := fmt.Sprintf("r%03d", i)
		if _, err := s.UpdateRecord(ctx, id, func(r *record.Run) error { r.Status = event.Failed; return nil }); err != nil {
			t.Fatal(err)
		}
		status[id] = event.Failed
	}
	for _, tt := range []struct {
		st    event.Status
		limit int
	}{{"", 50}, {"", 7}, {event.Failed, 50}, {event.Failed, 7}, {event.Succeeded, 300}, {event.Cancelled, 20}} {
		var want []string
		for _, id := range order {
			if st, ok := status[id]; ok && (tt.st == "" || st == tt.st) {
				want = append(want, id)
			}
		}
		var got []string
		opts := ListOptions{Status: tt.st, Limit: tt.limit}
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("%s/%d: pages never ended", tt.st, tt.limit)
			}
			p, err := s.ListPage(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Runs) > tt.limit {
				t.Fatalf("%s/%d: a page of %d", tt.st, tt.limit, len(p.Runs))
			}
			for _, r := range p.Runs {
				if r.Status != status[r.RunID] {
					t.Fatalf("%s/%d: %s listed %s, is %s", tt.st, tt.limit, r.RunID, r.Status, status[r.RunID])
				}
				if r.RunID == "r333" && len(r.Output) != 2<<20 {
					t.Fatalf("the large record listed with %d bytes of output", len(r.Output))
				}
				got = append(got, r.RunID)
			}
			if p.Next == "" {
				break
			}
			opts.Page = p.Next
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("status %q, limit %d (-want +got)\n%s", tt.st, tt.limit, d)
		}
	}
}
