package runner

import (
	"context"
	"errors"
	"time"

	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/thread"
)

// Journal keeps the journal of each thread (package journal). The runner
// appends as the thread lives and syncs where later work depends on an
// entry: a model response before its tool calls run, tool results before
// the next model call sees them, a root's end before its result is
// reported (a helper's end is sent before its result, not waited for: see
// endWritten).
type Journal interface {
	Open(th *thread.Thread) ThreadJournal
}

// ThreadJournal is one thread's journal. Append must not block on storage;
// it may hold entries for a bounded time, to store several at once, before
// it sends them on its own. Flush sends what was appended now, without
// waiting; Sync waits until everything appended so far is stored.
type ThreadJournal interface {
	Append(e journal.Entry)
	Flush()
	Sync(ctx context.Context) error
}

// noJournal keeps nothing: a runner without a Journal.
type noJournal struct{}

func (noJournal) Append(journal.Entry)       {}
func (noJournal) Flush()                     {}
func (noJournal) Sync(context.Context) error { return nil }

// endSyncTimeout bounds the wait for a thread's end to be stored, even when
// its context is over.
const endSyncTimeout = 10 * time.Second

func (st *threadState) record(e journal.Entry) {
	st.recordLazy(e)
	st.mu.Lock()
	st.unsynced = true
	st.mu.Unlock()
}

// recordLazy appends e without making the next sync wait for it: later
// work does not depend on it being stored, and the journal sends it when it
// sends the next entry that is waited for, or on its own soon after.
func (st *threadState) recordLazy(e journal.Entry) {
	if e.Time.IsZero() {
		e.Time = st.r.cfg.Now()
	}
	st.j.Append(e)
}

// sync makes what the thread journaled durable before work that depends on
// it; what nothing depends on is left to go with the next entry that is
// waited for (or on its own, soon). A journal that cannot store only costs
// that guarantee: the work goes on, and the step is at-least-once. A
// journal that refused a write for its limits (journal.ErrLimit) will keep
// nothing the thread does next: that error is returned, and the thread
// fails with it.
func (st *threadState) sync(ctx context.Context) error {
	st.mu.Lock()
	need := st.unsynced
	st.unsynced = false
	st.mu.Unlock()
	if !need {
		return nil
	}
	err := st.j.Sync(ctx)
	switch {
	case err == nil:
	case errors.Is(err, journal.ErrLimit):
		st.r.cfg.Logger.Warn("journal refused the thread's writes: the thread fails", "run", st.th.RunID, "thread", st.th.ID, "err", err)
		return err
	case ctx.Err() == nil:
		st.r.cfg.Logger.Warn("journal", "run", st.th.RunID, "thread", st.th.ID, "err", err)
	}
	return nil
}

// endWritten sends the thread's end, journaled last. A root's end is
// stored before its result is reported: the run's record is final on it.
// A helper's end is sent, not waited for, before its result: the result
// goes to its parent, which journals it as the agent call's tool result and
// stores that before its next model call (a tool result before the model
// call that sees it), and a parent that runs again takes a journaled
// result as the call's answer, never asking for the helper again. Until
// then the helper's result is what its parent's turn in flight waits on,
// and that turn is redone after a crash; its agent call then finds the
// helper's end (same id: run, parent, call) and is answered from it, or,
// if the end was lost with the crash, runs the helper's last turn again,
// as any tool call in flight runs again. On one server the wait would buy
// nothing more: the end reaches the server before the parent's entry of
// the result can (it is sent before the result, the entry only once the
// result arrived), and a stream stores what it receives in order, so
// whenever that entry is stored the end is too.
func (st *threadState) endWritten(ctx context.Context) {
	if st.th.Depth > 0 {
		st.mu.Lock()
		st.unsynced = false
		st.mu.Unlock()
		st.j.Flush()
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endSyncTimeout)
	_ = st.sync(sctx) // logged: the thread has ended either way
	cancel()
}

// startReplay indexes the thread's journal and opens it for writing.
func (st *threadState) startReplay() {
	st.j = noJournal{}
	if st.r.cfg.Journal != nil {
		st.j = st.r.cfg.Journal.Open(st.th)
	}
	if len(st.th.Replay) > 0 {
		st.replay = journal.NewReplay(st.th.Replay)
		st.replayTurns = st.replay.Turns()
	}
}

// replayed returns the journaled response of turn, if the thread is still
// replaying: its tokens count again in this run's usage (the record is
// built anew), but no model is called.
func (st *threadState) replayed(turn int) (model.Response, bool) {
	if !st.replaying(turn) {
		return model.Response{}, false
	}
	e, ok := st.replay.Response(turn)
	if !ok {
		return model.Response{}, false
	}
	st.addOwn(e.Usage)
	return model.Response{Text: e.Message.Content, ToolCalls: e.Message.ToolCalls, Usage: e.Usage}, true
}

// replaying reports whether turn is answered from the journal.
func (st *threadState) replaying(turn int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return turn < st.replayTurns
}

// diverge stops replaying after turn: a call of it was done again, so
// later journaled turns answer something the model no longer sees.
func (st *threadState) diverge(turn int) {
	st.mu.Lock()
	if st.replayTurns > turn+1 {
		st.replayTurns = turn + 1
	}
	st.mu.Unlock()
}

func threadInfo(th *thread.Thread) *journal.ThreadInfo {
	return &journal.ThreadInfo{ID: th.ID, ParentID: th.ParentID, Name: th.Name, Path: th.Path, Depth: th.Depth}
}
