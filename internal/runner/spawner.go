package runner

import (
	"context"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/thread"
)

// SpawnRequest asks for one helper of a parent thread. It names the parent
// and carries the agent call's arguments, nothing the spawner could derive:
// the run's owner derives the helper from the parent thread it holds, with
// thread.SetHelper, so the same call always makes the same helper wherever it
// runs.
type SpawnRequest struct {
	RunID    string
	ParentID string
	// CallID is the parent's tool call that spawns the helper, unique
	// within the parent (journal.CallKey): the helper's id derives from it
	// (journal.HelperID), so the same call always maps to the same helper.
	CallID string
	// Handoffs are the agents the parent handed off to, in order.
	Handoffs []string
	Name     string
	Task     string
	// ParentSpent is what the parent's model calls spent since its last
	// budget grant: the parent gives its grant back while it waits, and
	// the run's owner settles this.
	ParentSpent model.Usage
}

// SpawnCall is the agent call a Spawner answers.
type SpawnCall interface {
	// Admitted is called once the helper is admitted, with its thread id,
	// before Ended: the parent journals the spawn. It may wait.
	Admitted(child string)
	// Ended is called once, when the helper has ended, with its result; a
	// refused spawn ends with a *limits.Refusal, any other error means the
	// helper could not be run at all. It does not block, and may be called
	// before Spawn returns, from any goroutine.
	Ended(res thread.Result, err error)
}

// Spawner admits and runs helpers: the loop's one way to start another
// thread. Spawn returns at once, and tells call of its helper. A call
// waiting on its helper is held by the spawner as data, not by a goroutine
// of the loop's: a wide fan-out waits on thousands of them.
type Spawner interface {
	Spawn(ctx context.Context, req *SpawnRequest, call SpawnCall)
}
