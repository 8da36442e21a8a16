package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
)

// TestJournalBatchedSendsWithinItsLinger: a batched writer that is never
// synced or flushed still stores what it holds, in one message, once its
// linger is over, and again for what it is given after that.
func TestJournalBatchedSendsWithinItsLinger(t *testing.T) {
	s, _ := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	run, thread := "run-linger", "thread-1"
	// Stored messages as the stream delivers them, one at a time.
	cons, err := s.js.OrderedConsumer(ctx, JournalStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{SubjectJournal(run, thread, false)}})
	if err != nil {
		t.Fatal(err)
	}
	stored := func(what string) []journal.Entry {
		t.Helper()
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("waiting for %s to be stored: %v", what, err)
		}
		return s.decodeEntries(ctx, msg, WorkerPlace("w1"))
	}
	w := s.Journal(run, thread, "tok-1", false).Batched(10 * time.Millisecond)
	w.Append(journal.Entry{Kind: journal.KindStart, Task: "do it"})
	w.Append(journal.Entry{Kind: journal.KindTool, CallID: "c1", Result: "ran"})
	if got := stored("the held entries"); len(got) != 2 || got[0].Kind != journal.KindStart || got[1].Result != "ran" {
		t.Errorf("first message holds %+v; want the start and the tool result, in order", got)
	}
	w.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded})
	if got := stored("the end"); len(got) != 1 || got[0].Kind != journal.KindEnd {
		t.Errorf("second message holds %+v; want the end", got)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestJournalAppendSyncRead writes a thread's entries (one message each,
// or batched: held until Sync and stored as one message), a large one, a
// forged placement's and another thread's, and reads them back.
func TestJournalAppendSyncRead(t *testing.T) {
	s, nc := openStore(t, Config{})
	// Threads' entries come from a worker's store: a large one goes to the
	// worker's own place.
	ws, err := OpenTransfers(ctxT(t, 10*time.Second), nc, "w1", Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i, batched := range []bool{false, true} {
		run := fmt.Sprintf("run-%d", i)
		writer := func(w *JournalWriter) *JournalWriter {
			if batched {
				return w.Batched(time.Hour) // held until Sync, however slow this test runs
			}
			return w
		}
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			thread := "thread-1"

			coord := s.Journal(run, thread, "tok-1", true)
			coord.Append(journal.Entry{Kind: journal.KindPlacement, Worker: "w1", Attempt: 1})
			if err := coord.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			w := writer(ws.Journal(run, thread, "tok-1", false))
			w.Append(journal.Entry{Kind: journal.KindStart, Task: "do it", Thread: &journal.ThreadInfo{ID: thread, Name: "root", Path: "root"}})
			big := strings.Repeat("x", 2<<20) // over the NATS max payload: through the object store
			w.Append(journal.Entry{Kind: journal.KindModel, Message: &model.Message{Role: model.RoleAssistant, Content: big}})
			w.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded, Output: "done"})
			if batched {
				// A batched writer holds its entries until Sync.
				if held, err := s.ReadJournal(ctx, run, thread); err != nil || len(held) != 1 {
					t.Fatalf("before Sync: %d entries (%v), want the placement alone", len(held), err)
				}
			}
			if err := w.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			// A placement nobody journaled: its entries must not count.
			forged := writer(ws.Journal(run, thread, "tok-forged", false))
			forged.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded, Output: "planted"})
			// Another thread of the run.
			other := s.Journal(run, "thread-2", "", true)
			other.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Failed})
			if err := forged.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if err := other.Sync(ctx); err != nil {
				t.Fatal(err)
			}

			// The forged placement's end is skipped unread: what comes
			// back counts.
			got, err := s.ReadJournal(ctx, run, thread)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 4 {
				t.Fatalf("read %d entries, want 4 (the forged end skipped)", len(got))
			}
			if batched && (got[1].Seq != got[3].Seq || got[0].Seq == got[1].Seq) {
				t.Errorf("batched entries in messages %d, %d, %d; want the thread's three in one", got[1].Seq, got[2].Seq, got[3].Seq)
			}
			if !got[0].ByCoordinator || got[1].ByCoordinator || got[1].Placement != journal.Digest("tok-1") {
				t.Errorf("writers: %+v %+v", got[0], got[1])
			}
			if got[2].Message == nil || got[2].Message.Content != big {
				t.Errorf("large entry did not come back whole")
			}
			trusted := journal.Trusted(got)
			if len(trusted) != 4 {
				t.Fatalf("trusted %d entries, want 4", len(trusted))
			}
			end, ok := journal.NewReplay(trusted).Finished()
			if !ok || end.Output != "done" {
				t.Errorf("finished = %+v, %v; want the placement's own end", end, ok)
			}
			for _, e := range got {
				if strings.Contains(e.Placement, "tok-") {
					t.Errorf("a placement token entered the journal: %q", e.Placement)
				}
			}

			// The run's threads, as its record names them (neither is
			// its root, nor named by another's entries).
			all, err := s.ReadRunJournal(ctx, run, thread, "thread-2")
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 2 || all[0].ID != thread || len(all[0].Entries) != 4 || all[1].ID != "thread-2" || len(all[1].Entries) != 1 {
				t.Fatalf("whole run: %+v, want thread-1's 4 entries and thread-2's 1", all)
			}
			none, err := s.ReadRunJournal(ctx, run+"-unknown")
			if err != nil || len(none) != 0 {
				t.Fatalf("unknown run: %v, %v", none, err)
			}
			if _, err := s.ReadRunJournal(ctx, "bad.run"); err == nil {
				t.Error("a run id with a dot was accepted")
			}
			if _, err := s.ReadJournal(ctx, run, ""); err == nil {
				t.Error("a journal read naming no thread was accepted")
			}
		})
	}
}

// TestJournalWriteFailuresAreCounted: a write the stream does not store
// (here: the journal stream is gone) is reported to JournalFailed, whether
// its writer waits for it or not.
func TestJournalWriteFailuresAreCounted(t *testing.T) {
	failed := make(chan struct{}, 8)
	s, _ := openStore(t, Config{JournalFailed: func() { failed <- struct{}{} }})
	ctx := ctxT(t, 20*time.Second)
	if err := s.js.DeleteStream(ctx, JournalStream); err != nil {
		t.Fatal(err)
	}
	waited := s.Journal("run-x", "thread-1", "tok-1", false)
	waited.Append(journal.Entry{Kind: journal.KindStart, Task: "do it"})
	if err := waited.Sync(ctx); err == nil {
		t.Error("Sync reported no error for an entry that was not stored")
	}
	s.Journal("run-x", "thread-2", "", true).Append(journal.Entry{Kind: journal.KindPlacement, Worker: "w1"})
	for i := range 2 {
		select {
		case <-failed:
		case <-ctx.Done():
			t.Fatalf("JournalFailed told of %d failures, want 2 (one waited for, one not)", i)
		}
	}
}
