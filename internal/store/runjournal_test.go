package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/journal"
)

// TestRunJournalSyncCoversEveryThread: the coordinator's writes to many
// threads' journals are all stored once Sync returns, though it waits for
// one ack.
func TestRunJournalSyncCoversEveryThread(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	j := s.RunJournal("run-c")
	const threads = 50
	for i := range threads {
		j.Append(fmt.Sprintf("thread-%d", i), fmt.Sprintf("tok-%d", i), journal.Entry{Kind: journal.KindPlacement, Worker: "w1", Attempt: 1})
	}
	if err := j.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, threads)
	for i := range threads {
		ids[i] = fmt.Sprintf("thread-%d", i)
	}
	read, err := s.ReadRunJournal(ctx, "run-c", ids...)
	if err != nil {
		t.Fatal(err)
	}
	var got []journal.Entry
	for _, tj := range read {
		got = append(got, tj.Entries...)
	}
	if len(got) != threads {
		t.Fatalf("%d entries stored after Sync, want %d", len(got), threads)
	}
	for _, e := range got {
		if !e.ByCoordinator || e.Placement != journal.Digest("tok-"+strings.TrimPrefix(e.ThreadID, "thread-")) {
			t.Errorf("entry of %s: by coordinator %v, placement %q", e.ThreadID, e.ByCoordinator, e.Placement)
		}
	}
	if err := j.Sync(ctx); err != nil {
		t.Errorf("a second Sync with nothing appended: %v", err)
	}
}
