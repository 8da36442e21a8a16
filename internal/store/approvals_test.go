package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestApprovalsLifecycle(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	s, _ := openStore(t, Config{Now: func() time.Time { return now }})
	ctx := ctxT(t, 10*time.Second)
	base := time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)
	mk := func(id string, minute int) Approval {
		return Approval{ID: id, RunID: "run-1", ThreadID: "t-" + id, ThreadPath: "root/" + id, Tool: "bash",
			Arguments: `{"command":"rm -rf /tmp/x"}`, Coordinator: "c1", RequestedAt: base.Add(time.Duration(minute) * time.Minute)}
	}
	for _, a := range []Approval{mk("a3", 3), mk("a1", 1), mk("a2", 2)} {
		if err := s.PutApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch, err := s.WatchApprovals(wctx)
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]bool{}
	for range 3 {
		current[recv(t, watch).ID] = true
	}
	if len(current) != 3 {
		t.Fatalf("watch sent current %v", current)
	}

	got, err := s.GetApproval(ctx, "a2")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(mk("a2", 2), got); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	if _, err := s.GetApproval(ctx, "zz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}

	// Two people decide at once: exactly one wins.
	var wg sync.WaitGroup
	results := make(chan error, 2)
	for _, allow := range []bool{true, false} {
		wg.Go(func() {
			_, err := s.Decide(ctx, "a2", allow, "looked at it")
			results <- err
		})
	}
	wg.Wait()
	close(results)
	var won, lost int
	for err := range results {
		switch {
		case err == nil:
			won++
		case errors.Is(err, ErrDecided):
			lost++
		default:
			t.Fatal(err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("won %d, lost %d", won, lost)
	}
	decided := recv(t, watch)
	if decided.ID != "a2" || decided.Pending() || decided.Reason != "looked at it" || !decided.DecidedAt.Equal(now) {
		t.Fatalf("watch saw %+v", decided)
	}
	if _, err := s.Decide(ctx, "zz", true, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("decide missing: %v", err)
	}

	ids := func(as []Approval) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	all, err := s.ListApprovals(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a1", "a2", "a3"}, ids(all)); d != "" {
		t.Fatalf("all (-want +got)\n%s", d)
	}
	pending, err := s.ListApprovals(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a1", "a3"}, ids(pending)); d != "" {
		t.Fatalf("pending (-want +got)\n%s", d)
	}

	if err := s.DeleteApproval(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetApproval(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if pending, _ = s.ListApprovals(ctx, true); len(pending) != 1 || pending[0].ID != "a3" {
		t.Fatalf("pending after delete: %v", ids(pending))
	}
}

func TestApprovalJSON(t *testing.T) {
	data, err := json.Marshal(Approval{ID: "a", RunID: "r", ThreadID: "t", ThreadPath: "root/x", Tool: "bash",
		Arguments: "{}", Coordinator: "c", RequestedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"a","run_id":"r","thread_id":"t","thread_path":"root/x","tool":"bash","arguments":"{}",` +
		`"coordinator":"c","requested_at":"2025-01-01T00:00:00Z"}`
	if string(data) != want {
		t.Fatalf("got  %s\nwant %s", data, want)
	}
}

// GetApproval returns approval id, or ErrNotFound.
func (s *Store) GetApproval(ctx context.Context, id string) (Approval, error) {
	a, _, err := s.getApproval(ctx, id)
	return a, err
}

// DeleteApproval removes approval id; removing a missing one is no error.
func (s *Store) DeleteApproval(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := s.approvals.Purge(ctx, id); err != nil {
		return fmt.Errorf("store: delete approval %s: %w", id, err)
	}
	return nil
}
