package runner

import (
	"context"

	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

// SpawnRequest asks for one helper of a parent thread. In this process it
// carries the helper already resolved from the parent; a spawner that sends
// it elsewhere sends only the parent's identity, CallID, Handoffs, Name and
// Task, and the far side derives the rest with thread.Helper.
type SpawnRequest struct {
	RunID       string
	ParentID    string
	ParentDepth int
	ParentPath  string
	// CallID is the parent's tool call that spawns the helper, unique
	// within the parent (journal.CallKey): the helper's id derives from it
	// (journal.ThreadID), so the same call always maps to the same helper.
	CallID string
	// Handoffs are the agents the parent handed off to, in order.
	Handoffs []string
	Name     string
	Task     string
	// Parent is the agent the parent runs as: the helper's spec derives
	// from its template (spec.HelperSpec) where the helper is made, which
	// for a remote spawner is the coordinator, from the parent it holds.
	Parent      spec.Agent
	Cwd         string
	Permissions policy.Permissions
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

// ChildID is the id of the helper the request asks for: derived from the
// run, the parent and the call, or newID's when the request names no call.
func (r *SpawnRequest) ChildID(newID func() string) string {
	return journal.HelperID(r.RunID, r.ParentID, r.CallID, newID)
}

// Thread returns the helper thread the request describes, under id.
func (r *SpawnRequest) Thread(id string) thread.Thread {
	return thread.Thread{
		RunID:       r.RunID,
		ID:          id,
		ParentID:    r.ParentID,
		Depth:       r.ParentDepth + 1,
		Path:        r.ParentPath + "/" + r.Name,
		Name:        r.Name,
		Task:        r.Task,
		Agent:       spec.HelperSpec(r.Parent, r.Name),
		Cwd:         r.Cwd,
		Permissions: r.Permissions,
	}
}

// Spawner admits, runs and waits for helpers. A refused spawn returns a
// *limits.Refusal; any other error means the helper could not be run at all.
type Spawner interface {
	Spawn(ctx context.Context, req SpawnRequest) (thread.Result, error)
}
