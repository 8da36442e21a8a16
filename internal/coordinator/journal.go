package coordinator

import (
	"context"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/runner"
)

// The coordinator's part of the journal (package journal): it journals each
// placement of a thread under the placement's token (so replay counts only
// what a placement it made wrote), each spawn and refusal on the parent's
// journal, and the end of a thread no worker reported. It reads journals
// back when a thread runs again: every thread of a run delivered again or
// resumed, and a thread placed again after its worker was lost.

// journalReadTimeout bounds reading one journal back.
const journalReadTimeout = 30 * time.Second

// coordJournal appends e to thread's coordinator journal, without waiting:
// nothing the coordinator does next depends on it being stored.
func (c *Coordinator) coordJournal(run, thread, token string, e journal.Entry) {
	if c.cfg.Store == nil {
		return
	}
	e.Time = c.cfg.Now()
	c.cfg.Store.Journal(run, thread, token, true).Append(e)
}

// journalPlacement journals placement attempt of t on worker wid under its
// token (as a digest): the thread's entries written under it count.
func (c *Coordinator) journalPlacement(t *threadRec, wid string, attempt int, token string) {
	c.coordJournal(t.thread.RunID, t.thread.ID, token, journal.Entry{Kind: journal.KindPlacement, Worker: wid, Attempt: attempt})
}

// loadRunJournal reads a run's whole journal once, when the run is executed
// again: its threads then reuse their work.
func (c *Coordinator) loadRunJournal(rn *run) {
	if c.cfg.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(rn.ctx, journalReadTimeout)
	defer cancel()
	entries, err := c.cfg.Store.ReadJournal(ctx, rn.id, "")
	if err != nil {
		c.cfg.Logger.Warn("read journal: the run starts over", "run", rn.id, "err", err)
		return
	}
	byThread := map[string][]journal.Entry{}
	for _, e := range entries {
		byThread[e.ThreadID] = append(byThread[e.ThreadID], e)
	}
	rn.mu.Lock()
	rn.journals = make(map[string][]journal.Entry, len(byThread))
	for id, es := range byThread {
		rn.journals[id] = journal.Trusted(es)
	}
	journals := rn.journals
	rn.mu.Unlock()
	// Helpers that finished are part of the run's tree even when their
	// parents reuse their results without asking for them again.
	for id, es := range journals {
		if id == journal.RootID(rn.id) {
			continue
		}
		if _, ok := journal.NewReplay(es).Finished(); !ok {
			continue
		}
		tr := journal.BuildTranscript(rn.id, id, es)
		th := runner.Thread{RunID: rn.id, ID: id, ParentID: tr.ParentID, Depth: tr.Depth, Name: tr.Name}
		rn.rec.Emit(threadEvent(event.ThreadSpawned, th))
		e := threadEvent(event.ThreadFinished, th)
		e.Status, e.Time, e.Worker = event.Succeeded, tr.FinishedAt, tr.Worker
		rn.rec.Emit(e)
		rn.rec.ThreadUsage(id, tr.Usage)
		rn.rec.Reused(id)
	}
}

// replayOf is what thread t reuses when placed now: its journal read back
// fresh when an earlier placement of it may have written more, else what
// the run's journal held when the run started again.
func (c *Coordinator) replayOf(rn *run, t *threadRec, reread bool) []journal.Entry {
	if c.cfg.Store == nil {
		return nil
	}
	if reread {
		ctx, cancel := context.WithTimeout(t.ctx, journalReadTimeout)
		defer cancel()
		entries, err := c.cfg.Store.ReadJournal(ctx, rn.id, t.thread.ID)
		if err == nil {
			return journal.Trusted(entries)
		}
		c.cfg.Logger.Warn("read journal: the thread starts over", "run", rn.id, "thread", t.thread.ID, "err", err)
		return nil
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.journals[t.thread.ID]
}

// finishedInJournal returns the journaled result of a helper that
// succeeded in an earlier execution of the run: it is not placed again.
func (rn *run) finishedInJournal(id string) (runner.Result, bool) {
	rn.mu.Lock()
	entries := rn.journals[id]
	rn.mu.Unlock()
	if len(entries) == 0 {
		return runner.Result{}, false
	}
	end, ok := journal.NewReplay(entries).Finished()
	if !ok {
		return runner.Result{}, false
	}
	return runner.Result{Status: event.Succeeded, Output: end.Output, Usage: end.Usage, Own: end.Own}, true
}
