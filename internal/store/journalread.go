package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/formica-run/formica/internal/journal"
)

// Reading journals back. A worker's credentials may write any thread's
// journal subject, the threads of runs it never hosted included, so what a
// reader meets under a run is not all the run's: only entries written
// under a placement a coordinator made count (journal.Trusted), and a
// reader pays as little as it can for the rest.
//
//   - It reads the threads the run has and no others: the root, then the
//     helpers its trusted entries name (journal.Children), level by level.
//     Entries on subjects of threads nobody started are never read.
//   - On a thread's own subject (.t) it judges each message by its
//     placement header before decoding it: a proof that does not check, or
//     a bare digest no coordinator's placement entry vouches for, skips the
//     message unread, and a reference it holds is never followed. What it
//     still reads is bounded by the journal's per-thread limits
//     (Config.JournalMaxThreadMsgs messages of at most JournalMaxMsgBytes).
//   - A proof's key is looked up once per read, and at most maxKeyMisses
//     keys nobody published are asked for.

// ThreadJournal is one thread's journal as read back: the entries that
// count, in the order they were stored.
type ThreadJournal struct {
	ID      string
	Entries []journal.Entry
}

// readersInFlight bounds the threads one ReadRunJournal reads at once.
const readersInFlight = 16

// ReadJournal returns the entries of thread's journal in run that count
// (journal.Trusted: the coordinator's, and the thread's own written under a
// placement a coordinator made, with Entry.Proof set where it was a
// proof), in the order they were stored; none for a thread that journaled
// nothing. Messages that do not count are skipped undecoded.
func (s *Store) ReadJournal(ctx context.Context, run, thread string) ([]journal.Entry, error) {
	if err := checkID(run); err != nil {
		return nil, err
	}
	if err := checkID(thread); err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	pf := &proofs{s: s, run: run}
	out, err := s.readThread(ctx, run, thread, pf)
	if err != nil {
		return nil, fmt.Errorf("store: journal of %s/%s: %w", run, thread, err)
	}
	return out, nil
}

// ReadRunJournal returns the journals of run's threads that journaled
// anything, root first, then level by level in the order their parents
// name them: the root's, the helpers the entries read so far name
// (journal.Children), and the threads of known (ids the caller holds as
// the run's, such as its record's tree). Nothing else under the run is
// read: entries planted on the subjects of threads the run does not have
// cost nothing.
func (s *Store) ReadRunJournal(ctx context.Context, run string, known ...string) ([]ThreadJournal, error) {
	if err := checkID(run); err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	pf := &proofs{s: s, run: run}
	seen := map[string]bool{}
	var level []string
	add := func(id string) {
		if !seen[id] && checkID(id) == nil {
			seen[id] = true
			level = append(level, id)
		}
	}
	add(journal.RootID(run))
	for _, id := range known {
		add(id)
	}
	var out []ThreadJournal
	for len(level) > 0 {
		read, err := s.readThreads(ctx, run, level, pf)
		if err != nil {
			return nil, fmt.Errorf("store: journal of %s: %w", run, err)
		}
		level = nil
		for _, tj := range read {
			if len(tj.Entries) == 0 {
				continue
			}
			out = append(out, tj)
			for _, child := range journal.Children(run, tj.ID, tj.Entries) {
				add(child)
			}
		}
	}
	return out, nil
}

// readThreads reads the journals of threads, readersInFlight at a time,
// and returns them in the order of threads.
func (s *Store) readThreads(ctx context.Context, run string, threads []string, pf *proofs) ([]ThreadJournal, error) {
	out := make([]ThreadJournal, len(threads))
	errs := make([]error, len(threads))
	sem := make(chan struct{}, readersInFlight)
	var wg sync.WaitGroup
	for i, id := range threads {
		out[i].ID = id
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].Entries, errs[i] = s.readThread(ctx, run, id, pf)
		})
	}
	wg.Wait()
	if err := cmp.Or(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// readThread reads thread's journal in run: the coordinator's subject
// first (its entries all count, and vouch for placements of journals
// written before proofs), then the thread's own, judging each message by
// its placement header before decoding it.
func (s *Store) readThread(ctx context.Context, run, thread string, pf *proofs) ([]journal.Entry, error) {
	base := "formica.journal." + run + "." + thread
	var byCoord []journal.Entry
	vouched := map[string]string{} // placement digest -> its worker, from the coordinator's entries
	err := s.readDirect(ctx, JournalStream, base+".c", 1, directBatch, func(msg *storedMsg) error {
		for _, e := range s.decodeEntries(ctx, msg, CoordinatorsPlace) {
			e.Seq = msg.seq
			if e.Kind == journal.KindPlacement && e.Placement != "" {
				vouched[e.Placement] = e.Worker
			}
			byCoord = append(byCoord, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var own []journal.Entry
	skipped, skippedBytes := 0, 0
	err = s.readDirect(ctx, JournalStream, base+".t", 1, directBatch, func(msg *storedMsg) error {
		header := msg.hdr.Get(HeaderPlacement)
		var proof *journal.Proof
		var worker string
		if journal.IsProof(header) {
			if proof = pf.check(ctx, thread, header); proof != nil {
				worker = proof.Worker
			}
		} else if w, ok := vouched[header]; ok && header != "" {
			worker = w
		}
		if worker == "" {
			skipped++
			skippedBytes += len(msg.data)
			return nil
		}
		for _, e := range s.decodeEntries(ctx, msg, WorkerPlace(worker)) {
			e.Seq = msg.seq
			if proof != nil {
				e.Proof, e.Placement = proof, proof.Digest
			}
			own = append(own, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if skipped > 0 {
		s.log.Warn("store: journal messages under no placement a coordinator made were skipped unread",
			"run_id", run, "thread_id", thread, "messages", skipped, "bytes", skippedBytes)
	}
	return mergeBySeq(byCoord, own), nil
}

// mergeBySeq merges two lists of entries, each in stream order, into one.
func mergeBySeq(a, b []journal.Entry) []journal.Entry {
	out := slices.Concat(a, b)
	slices.SortStableFunc(out, func(x, y journal.Entry) int { return cmp.Compare(x.Seq, y.Seq) })
	return out
}
