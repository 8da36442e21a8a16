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
	// Admitted, when set, is called once the helper is admitted, with its
	// thread id, before the spawner waits for its end: the parent journals
	// the spawn. Not sent anywhere.
	Admitted func(child string)
}

// ReportAdmitted calls the request's Admitted hook, if any: a spawner calls
// it once it knows the helper was admitted, and its id.
func (r *SpawnRequest) ReportAdmitted(child string) {
	if r.Admitted != nil {
		r.Admitted(child)
	}
}

// Spawner admits, runs and waits for helpers: the loop's one way to start
// another thread. A refused spawn returns a *limits.Refusal; any other
// error means the helper could not be run at all.
type Spawner interface {
	Spawn(ctx context.Context, req *SpawnRequest) (thread.Result, error)
}
