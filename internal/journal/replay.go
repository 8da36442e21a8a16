package journal

import "github.com/formica-run/formica/internal/event"

// Trusted returns the entries that count on replay (DESIGN "Trust"):
// those the coordinator wrote, and those a thread wrote under a placement a
// coordinator made: one whose proof checked when it was read (Proof), or,
// in journals written before proofs, one the coordinator journaled.
// Anything else (an entry without a placement, or under a placement nobody
// made) is dropped, so no worker can plant work in another thread's
// history.
func Trusted(entries []Entry) []Entry {
	placed := map[string]bool{}
	for _, e := range entries {
		if e.ByCoordinator && e.Kind == KindPlacement && e.Placement != "" {
			placed[e.Placement] = true
		}
	}
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if e.ByCoordinator || e.Proof != nil || (e.Placement != "" && placed[e.Placement]) {
			out = append(out, e)
		}
	}
	return out
}

// Replay is what a thread that runs again reuses from its journal: model
// responses by turn, tool results and approval decisions by call, and
// whether it already finished. The runner walks its turns through it and
// stops replaying at the first turn it has to do again.
type Replay struct {
	responses map[int]Entry
	// compactions are each turn's elision and summary, in journal order.
	compactions map[int][]Entry
	tools       map[string]Entry
	// starts counts each call's journaled starts (ToolStarted).
	starts    map[string]int
	approvals map[string]Entry
	end       *Entry
	turns     int
	started   bool
}

// NewReplay indexes trusted entries (Trusted). The first entry of each turn
// and call wins (later ones can only be the same work done again), except
// that a tool result that does not stand (reusable) gives way to a later one.
// A turn's compactions are those of the first execution that journaled
// any: a turn redone after a crash reuses them and journals only what it
// adds.
func NewReplay(entries []Entry) *Replay {
	r := &Replay{responses: map[int]Entry{}, compactions: map[int][]Entry{}, tools: map[string]Entry{}, starts: map[string]int{},
		approvals: map[string]Entry{}}
	for _, e := range entries {
		switch e.Kind {
		case KindElision, KindSummary:
			r.compactions[e.Turn] = addCompaction(r.compactions[e.Turn], e)
		case KindStart:
			r.started = true
		case KindModel:
			if _, ok := r.responses[e.Turn]; !ok && e.Message != nil {
				r.responses[e.Turn] = e
			}
		case KindTool:
			k := CallKey(e.Turn, e.CallID)
			if old, ok := r.tools[k]; !ok || !reusable(old) {
				r.tools[k] = e
			}
			if e.ToolStatus == ToolStarted {
				r.starts[k]++
			}
		case KindApproval:
			k := CallKey(e.Turn, e.CallID)
			if _, ok := r.approvals[k]; !ok && !e.InDoubt {
				r.approvals[k] = e
			}
		case KindEnd:
			if e.Status == event.Succeeded && r.end == nil {
				end := e
				r.end = &end
			}
		}
	}
	for r.responses[r.turns].Message != nil { // each response kept has one
		r.turns++
	}
	return r
}

// addCompaction adds e to a turn's compactions, unless that turn has one
// of its kind already: an elision then a summary, at most one of each.
func addCompaction(turn []Entry, e Entry) []Entry {
	for _, o := range turn {
		if o.Kind == e.Kind {
			return turn
		}
	}
	return append(turn, e)
}

// Compactions returns the journaled elision and summary of turn, in the
// order they were done.
func (r *Replay) Compactions(turn int) []Entry {
	if r == nil {
		return nil
	}
	return r.compactions[turn]
}

// Empty reports whether there is nothing to reuse.
func (r *Replay) Empty() bool { return r == nil || (r.turns == 0 && r.end == nil) }

// Started reports whether the thread journaled its start.
func (r *Replay) Started() bool { return r != nil && r.started }

// Turns is how many leading turns have a journaled model response.
func (r *Replay) Turns() int {
	if r == nil {
		return 0
	}
	return r.turns
}

// Response returns the journaled model response of turn.
func (r *Replay) Response(turn int) (Entry, bool) {
	if r == nil || turn >= r.turns {
		return Entry{}, false
	}
	e, ok := r.responses[turn]
	return e, ok
}

// ToolResult returns the journaled result of call callID of turn, when it
// may be reused: a helper that failed is asked again instead.
func (r *Replay) ToolResult(turn int, callID string) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	e, ok := r.tools[CallKey(turn, callID)]
	if !ok || !reusable(e) {
		return Entry{}, false
	}
	return e, true
}

// InDoubt reports whether call callID of turn is in doubt: journaled as
// started (at most once), with no result after its last start. starts
// counts its starts, each a try that may have taken effect.
func (r *Replay) InDoubt(turn int, callID string) (starts int, ok bool) {
	if r == nil {
		return 0, false
	}
	k := CallKey(turn, callID)
	e, ok := r.tools[k]
	if !ok || e.ToolStatus != ToolStarted {
		return 0, false
	}
	return r.starts[k], true
}

// reusable reports whether a tool result stands on replay: not a helper
// that failed (it is asked again), nor a call that never ran, nor a start
// (its result, or the lack of one, decides).
func reusable(e Entry) bool {
	return e.ToolStatus != ToolHelperFailed && e.ToolStatus != ToolNotRun && e.ToolStatus != ToolStarted
}

// Approval returns the journaled approval decision of call callID of turn.
func (r *Replay) Approval(turn int, callID string) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	e, ok := r.approvals[CallKey(turn, callID)]
	return e, ok
}

// Finished returns the thread's end entry when it succeeded: such a thread
// is never run again.
func (r *Replay) Finished() (Entry, bool) {
	if r == nil || r.end == nil {
		return Entry{}, false
	}
	return *r.end, true
}
