package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

func TestRecordsCRUD(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 10*time.Second)
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r := record.Run{RunID: "r1", Status: record.Queued, Task: "t", CreatedAt: at,
		Threads: []record.Thread{{ID: "t1", Name: "root", Status: event.Running}}}
	rev, err := s.CreateRecord(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRecord(ctx, r); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	got, gotRev, err := s.GetRecord(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r, got); d != "" || gotRev != rev {
		t.Fatalf("rev %d want %d; (-want +got)\n%s", gotRev, rev, d)
	}
	if _, _, err := s.GetRecord(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
	if _, _, err := s.GetRecord(ctx, "a.b"); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("bad id: %v", err)
	}

	upd, err := s.UpdateRecord(ctx, "r1", func(r *record.Run) error {
		r.Status, r.Output, r.RunID = event.Succeeded, "done", "ignored"
		return nil
	})
	if err != nil || upd.Status != event.Succeeded || upd.RunID != "r1" {
		t.Fatalf("update: %+v, %v", upd, err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateRecord(ctx, "r1", func(*record.Run) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if _, err := s.UpdateRecord(ctx, "nope", func(*record.Run) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}

	r.Output = "put"
	if _, err := s.PutRecord(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.GetRecord(ctx, "r1"); got.Output != "put" || got.Status != record.Queued {
		t.Fatalf("after put: %+v", got)
	}
	if err := s.DeleteRecord(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetRecord(ctx, "r1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := s.CreateRecord(ctx, r); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

func TestUpdateRecordRetriesOnConflict(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	if _, err := s.CreateRecord(ctx, record.Run{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	// fn races a writer on its first call: the CAS fails, fn runs again on
	// the writer's value.
	calls := 0
	got, err := s.UpdateRecord(ctx, "r1", func(r *record.Run) error {
		calls++
		if calls == 1 {
			if _, err := s.PutRecord(ctx, record.Run{RunID: "r1", Error: "from the other writer"}); err != nil {
				return err
			}
		}
		r.Attempts++
		return nil
	})
	if err != nil || calls != 2 || got.Attempts != 1 || got.Error != "from the other writer" {
		t.Fatalf("calls %d, record %+v, err %v", calls, got, err)
	}

	// Concurrent increments: none is lost.
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := s.UpdateRecord(ctx, "r1", func(r *record.Run) error { r.Attempts++; return nil })
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if r, _, _ := s.GetRecord(ctx, "r1"); r.Attempts != 1+writers*each {
		t.Fatalf("attempts %d, want %d", r.Attempts, 1+writers*each)
	}
}

func TestListRecords(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 10*time.Second)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []event.Status{record.Queued, event.Running, event.Succeeded, event.Running, event.Failed}
	for i, st := range statuses {
		id := string(rune('a' + i))
		if _, err := s.CreateRecord(ctx, record.Run{RunID: id, Status: st, CreatedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRecord(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts ListOptions
		want []string
	}{
		{"all, newest first", ListOptions{}, []string{"e", "d", "b", "a"}},
		{"status", ListOptions{Status: event.Running}, []string{"d", "b"}},
		{"limit", ListOptions{Limit: 2}, []string{"e", "d"}},
		{"status and limit", ListOptions{Status: event.Running, Limit: 1}, []string{"d"}},
		{"none", ListOptions{Status: event.Cancelled}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := s.ListRecords(ctx, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.RunID)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestWatchRecord(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 10*time.Second)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watching a run before its record exists waits for it.
	ch, err := s.WatchRecord(wctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRecord(ctx, record.Run{RunID: "r1", Status: record.Queued}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.Status != record.Queued {
		t.Fatalf("first: %+v", r)
	}
	if _, err := s.UpdateRecord(ctx, "r1", func(r *record.Run) error { r.Status = event.Running; return nil }); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.Status != event.Running {
		t.Fatalf("update: %+v", r)
	}
	// A new watcher starts from the current value.
	ch2, err := s.WatchRecord(wctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch2); r.Status != event.Running {
		t.Fatalf("current: %+v", r)
	}
	cancel()
	for _, c := range []<-chan record.Run{ch, ch2} {
		select {
		case _, ok := <-c:
			if ok {
				t.Fatal("value after cancel")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("channel not closed after cancel")
		}
	}
}

func TestLargeRecord(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	big := record.Run{RunID: "big", Status: event.Succeeded, Output: strings.Repeat("x", 3<<19), CreatedAt: time.Now().UTC()}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.WatchRecord(wctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRecord(ctx, big); err != nil {
		t.Fatal(err)
	}
	raw, err := s.runs.Get(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	ref := refIn(raw.Value())
	if ref == "" || len(raw.Value()) > 200 {
		t.Fatalf("the bucket holds %d bytes %q..., want a pointer", len(raw.Value()), raw.Value()[:min(40, len(raw.Value()))])
	}
	got, _, err := s.GetRecord(ctx, "big")
	if err != nil || got.Output != big.Output {
		t.Fatalf("get: %d bytes of output, %v", len(got.Output), err)
	}
	if r := recv(t, ch); r.Output != big.Output {
		t.Fatalf("watch: %d bytes of output", len(r.Output))
	}
	if rs, err := s.ListRecords(ctx, ListOptions{}); err != nil || len(rs) != 1 || rs[0].Output != big.Output {
		t.Fatalf("list: %d records, %v", len(rs), err)
	}

	// Shrinking the record brings it back into the bucket and drops its object.
	if _, err := s.UpdateRecord(ctx, "big", func(r *record.Run) error { r.Output = "small"; return nil }); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.Output != "small" {
		t.Fatalf("watch after shrink: %q", r.Output[:min(10, len(r.Output))])
	}
	if raw, _ := s.runs.Get(ctx, "big"); !bytes.HasPrefix(raw.Value(), []byte(`{"run_id":`)) {
		t.Fatalf("bucket value after shrink: %.40s", raw.Value())
	}
	if _, err := s.payloads.GetInfo(ctx, ref); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("old object: %v, want it deleted", err)
	}
	// Growing it again and deleting it leaves no object behind.
	if _, err := s.UpdateRecord(ctx, "big", func(r *record.Run) error { r.Output = big.Output; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRecord(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	objs, err := s.payloads.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Fatalf("%d objects left, want 0", len(objs))
	}
}

// recv waits a bounded time for one value.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received in 5s")
	}
	panic("unreachable")
}

// PutRecord stores r under r.RunID unconditionally and returns its revision.
func (s *Store) PutRecord(ctx context.Context, r record.Run) (uint64, error) {
	old := s.oldRef(ctx, r.RunID)
	rev, err := s.writeRecord(ctx, r, func(ctx context.Context, val []byte) (uint64, error) {
		return s.runs.Put(ctx, r.RunID, val)
	})
	if err == nil {
		s.dropObject(ctx, old)
	}
	return rev, err
}

// DeleteRecord removes the record of run id (and its object, if large).
func (s *Store) DeleteRecord(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	old := s.oldRef(ctx, id)
	if err := s.runs.Purge(ctx, id); err != nil {
		return fmt.Errorf("store: delete record %s: %w", id, err)
	}
	s.dropObject(ctx, old)
	return nil
}

// ListRecords returns one page of records matching opts, newest first;
// see ListPage.
func (s *Store) ListRecords(ctx context.Context, opts ListOptions) ([]record.Run, error) {
	p, err := s.ListPage(ctx, opts)
	return p.Runs, err
}

// oldRef is the object behind the current value of id, if any.
func (s *Store) oldRef(ctx context.Context, id string) string {
	e, err := s.runs.Get(ctx, id)
	if err != nil {
		return ""
	}
	return refIn(e.Value())
}
