package store

import (
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
)

// TestJournalProofsCheckOnRead: a thread's entries under the proof of a
// placement a coordinator made (its key published) count on replay with no
// entry of the coordinator's; entries a worker planted in the thread under
// a forged proof (its own key, or an unpublished one), a proof replayed
// from another thread or run, or a tampered one are read but do not count.
// A client's store, reading the same journal, checks them alike.
func TestJournalProofsCheckOnRead(t *testing.T) {
	s, nc := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	ws, err := OpenTransfers(ctx, nc, "w1", Config{})
	if err != nil {
		t.Fatal(err)
	}
	coord, _ := journal.NewSigner()
	if err := s.PublishPlacementKey(ctx, coord); err != nil {
		t.Fatal(err)
	}
	unpublished, _ := journal.NewSigner()
	run, thread := "run-p", "thread-1"
	write := func(proof, output string) {
		t.Helper()
		w := ws.Journal(run, thread, "tok-1", false).Proven(proof)
		w.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded, Output: output})
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	own := coord.Sign(run, thread, "w1", 1, "tok-1")
	w := ws.Journal(run, thread, "tok-1", false).Proven(own).Batched(time.Hour)
	w.Append(journal.Entry{Kind: journal.KindStart, Task: "do it", Thread: &journal.ThreadInfo{ID: thread, Name: "h", Path: "root/h", Depth: 1}})
	w.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded, Output: "done"})
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	write(unpublished.Sign(run, thread, "w1", 1, "tok-1"), "planted: unpublished key")
	write(strings.Replace(unpublished.Sign(run, thread, "w1", 1, "tok-1"), unpublished.KeyID(), coord.KeyID(), 1), "planted: forged under the coordinator's key id")
	write(coord.Sign(run, "thread-2", "w1", 1, "tok-1"), "planted: another thread's proof")
	write(coord.Sign("run-q", thread, "w1", 1, "tok-1"), "planted: another run's proof")
	write(strings.Replace(own, ".w1.", ".w2.", 1), "planted: tampered")
	write("", "planted: a bare digest no coordinator journaled")

	client, err := Open(ctx, nc, Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*Store{"coordinator": s, "client": client} {
		got, err := st.ReadJournal(ctx, run, thread)
		if err != nil {
			t.Fatal(err)
		}
		// The planted ends are skipped unread.
		if len(got) != 2 {
			t.Fatalf("%s read %d entries, want 2", name, len(got))
		}
		trusted := journal.Trusted(got)
		if len(trusted) != 2 {
			for _, e := range trusted {
				t.Logf("trusted: %s %q", e.Kind, e.Output)
			}
			t.Fatalf("%s: %d entries count, want 2 (the placement's own)", name, len(trusted))
		}
		if end, ok := journal.NewReplay(trusted).Finished(); !ok || end.Output != "done" {
			t.Errorf("%s: finished %+v %v, want the placement's own end", name, end, ok)
		}
		tr := journal.BuildTranscript(run, thread, trusted)
		if tr.Worker != "w1" || tr.Attempts != 1 || tr.Entries[0].Kind != journal.KindPlacement {
			t.Errorf("%s: transcript worker %q, %d attempts, first entry %s", name, tr.Worker, tr.Attempts, tr.Entries[0].Kind)
		}
		for _, e := range got {
			if strings.Contains(e.Placement, "tok-") {
				t.Errorf("a placement token entered the journal: %q", e.Placement)
			}
		}
	}
}
