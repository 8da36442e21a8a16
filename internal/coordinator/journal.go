package coordinator

import (
	"context"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
)

// The coordinator's part of the journal (package journal): it signs each
// placement of a thread with its proof key (so replay counts only what a
// placement it made wrote: the worker journals the proof with each entry),
// journals the end of a thread no worker reported and the spawn of a
// helper it answers from the journal (a parent journals its other spawns
// and refusals itself). It reads journals back when a thread runs again:
// every thread of a run delivered again or resumed, and a thread placed
// again after its worker was lost.

// journalReadTimeout bounds reading one journal back.
const journalReadTimeout = 30 * time.Second

// journalSyncTimeout bounds the wait for a run's journal at its end.
const journalSyncTimeout = 10 * time.Second

// coordJournal appends e to thread's coordinator journal in rn, without
// waiting: nothing the coordinator does next depends on it being stored,
// until the run ends (syncJournal).
func (c *Coordinator) coordJournal(rn *run, thread, token string, e journal.Entry) {
	if rn.journal == nil || !rn.acting() {
		return
	}
	e.Time = c.cfg.Now()
	rn.journal.Append(thread, token, e)
}

// syncJournal waits until what the coordinator journaled for rn is stored,
// before its record is final: a run resumed later finds every placement,
// so the work done under each counts.
func (c *Coordinator) syncJournal(rn *run) {
	if rn.journal == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalSyncTimeout)
	defer cancel()
	if err := rn.journal.Sync(ctx); err != nil {
		c.cfg.Logger.Warn("journal", "run_id", rn.id, "err", err)
	}
}

// placementProof is the proof of placement attempt of t on worker wid
// under token, which the worker journals with the thread's entries: they
// count on replay because this coordinator signed it. Nothing is stored
// for it (the signature, checked against the published key, is the
// placement's record), and a run that keeps no journal needs none.
func (c *Coordinator) placementProof(rn *run, t *threadRec, wid string, attempt int, token string) string {
	if rn.journal == nil || c.signer == nil {
		return ""
	}
	return c.signer.Sign(rn.id, t.thread.ID, wid, attempt, token)
}

// publishKey publishes the coordinator's placement key, as it starts and
// then every store.KeyRepublish (republish), so that its proofs check for
// as long as the journals they vouch for are kept.
func (c *Coordinator) publishKey(ctx context.Context) error {
	if c.signer == nil {
		return nil
	}
	if err := c.cfg.Store.PublishPlacementKey(ctx, c.signer); err != nil {
		return err
	}
	c.keyPublished.Store(time.Now().UnixNano())
	return nil
}

// republish publishes the placement key again, off the caller's loop, once
// store.KeyRepublish has passed since it last was.
func (c *Coordinator) republish() {
	last := c.keyPublished.Load()
	if c.signer == nil || time.Since(time.Unix(0, last)) < store.KeyRepublish || !c.keyPublished.CompareAndSwap(last, time.Now().UnixNano()) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(c.background, journalSyncTimeout)
		defer cancel()
		if err := c.publishKey(ctx); err != nil {
			c.cfg.Logger.Warn("publish placement key", "err", err)
			c.keyPublished.Store(last) // tried again on the next tick
		}
	}()
}

// loadRunJournal reads a run's whole journal once, when the run is executed
// again: its threads then reuse their work.
func (c *Coordinator) loadRunJournal(rn *run) {
	if c.cfg.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(rn.ctx, journalReadTimeout)
	defer cancel()
	// The run's threads only: the root and the helpers its journal names.
	threads, err := c.cfg.Store.ReadRunJournal(ctx, rn.id)
	if err != nil {
		c.cfg.Logger.Warn("read journal: the run starts over", "run_id", rn.id, "err", err)
		return
	}
	rn.mu.Lock()
	rn.journals = make(map[string][]journal.Entry, len(threads))
	for _, tj := range threads {
		rn.journals[tj.ID] = journal.Trusted(tj.Entries)
	}
	journals := rn.journals
	rn.mu.Unlock()
	// Helpers that finished are part of the run's tree even when their
	// parents reuse their results without asking for them again; calls
	// found in doubt before are reused without a new tool.result, and
	// count in the record all the same.
	for id, es := range journals {
		tr := journal.BuildTranscript(rn.id, id, es)
		rn.rec.InDoubtBefore(id, tr.InDoubt)
		if id == journal.RootID(rn.id) {
			continue
		}
		if _, ok := journal.NewReplay(es).Finished(); !ok {
			continue
		}
		th := thread.Thread{RunID: rn.id, ID: id, ParentID: tr.ParentID, Depth: tr.Depth, Name: tr.Name}
		rn.rec.Emit(threadEvent(event.ThreadSpawned, &th))
		e := threadEvent(event.ThreadFinished, &th)
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
		c.cfg.Logger.Warn("read journal: the thread starts over", "run_id", rn.id, "thread_id", t.thread.ID, "err", err)
		return nil
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.journals[t.thread.ID]
}

// finishedInJournal returns the journaled result of a helper that
// succeeded in an earlier execution of the run: it is not placed again.
func (rn *run) finishedInJournal(id string) (thread.Result, bool) {
	rn.mu.Lock()
	entries := rn.journals[id]
	rn.mu.Unlock()
	if len(entries) == 0 {
		return thread.Result{}, false
	}
	end, ok := journal.NewReplay(entries).Finished()
	if !ok {
		return thread.Result{}, false
	}
	return thread.Result{Status: event.Succeeded, Output: end.Output, Usage: end.Usage, Own: end.Own}, true
}

// Budgets and the journal: a run executed again counts what it reuses
// against its budgets, so a resumed or redelivered run spends no more than
// its budget across all its executions, and no token counts twice. A
// thread placed with a replay settles its journaled model calls on its
// lease (what renewals of an earlier placement settled counts); a finished
// helper that is reused, whether a spawn finds it in the journal or its
// parent's journaled result answers the call, is charged once, with its
// subtree's tokens and one spawn, at its parent's node.

// accountReplay counts what t's replay reuses, before its placement's grant
// is handed out, and reports whether it reuses any work.
func (c *Coordinator) accountReplay(rn *run, t *threadRec) bool {
	if len(t.replay) == 0 {
		return false
	}
	rp := journal.NewReplay(t.replay)
	var own model.Usage
	for turn := range rp.Turns() {
		e, _ := rp.Response(turn)
		own = own.Add(e.Usage)
		for _, call := range e.Message.ToolCalls {
			if res, ok := rp.ToolResult(turn, call.ID); ok && res.Usage != (model.Usage{}) {
				if rn.chargeReused(journal.ThreadID(rn.id, t.thread.ID, journal.CallKey(turn, call.ID)), t.lease.Node(), res.Usage) {
					c.cfg.Metrics.ThreadReused()
				}
			}
		}
	}
	// Summaries of the conversation are model calls too, reused up to the
	// turn in flight.
	for turn := range rp.Turns() + 1 {
		for _, c := range rp.Compactions(turn) {
			own = own.Add(c.Usage)
		}
	}
	t.lease.Account(limits.SpendOf(own))
	return !rp.Empty()
}

// chargeReused charges the reused helper id's subtree usage u, and its
// spawn, at node n, once per run, and reports whether it did; a helper this
// execution ran is counted by its own lease already.
func (rn *run) chargeReused(id string, n *limits.Node, u model.Usage) bool {
	rn.mu.Lock()
	_, ran := rn.threads[id]
	done := rn.charged[id] || ran
	rn.charged[id] = true
	rn.mu.Unlock()
	if !done {
		n.Charge(limits.SpendOf(u), 1)
	}
	return !done
}
