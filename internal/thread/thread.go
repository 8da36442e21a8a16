// Package thread is the data of one executing agent: what a runner needs to
// run it (Thread) and how it ended (Result). It sits below the agent loop and
// the protocol so that the store, the API and the coordinator can speak of
// threads without linking the loop or its tools.
package thread

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
)

// ErrUnknownAgent: a handoff names an agent the thread's catalog lacks.
var ErrUnknownAgent = errors.New("unknown agent")

// Thread is one executing agent, root or helper: everything a runner needs to
// run it, as plain data so it can travel to another process.
type Thread struct {
	RunID    string `msgpack:"run_id"`
	ID       string `msgpack:"id"`
	ParentID string `msgpack:"parent_id,omitempty"`
	Depth    int    `msgpack:"depth"`
	// Path is the names from the run's root down to this thread (formica/name/...),
	// for approvals and transcripts.
	Path string `msgpack:"path"`
	Name string `msgpack:"name"`
	Task string `msgpack:"task"`
	// Agent is the resolved spec the thread starts as.
	Agent spec.Agent `msgpack:"agent"`
	// Agents are the handoff targets reachable from Agent, by name.
	Agents map[string]spec.Agent `msgpack:"agents,omitempty"`
	// Cwd is the absolute directory the harness tools act in.
	Cwd string `msgpack:"cwd"`
	// Permissions is the policy stack inherited from every ancestor.
	Permissions policy.Permissions `msgpack:"permissions,omitempty"`
	// Replay is the thread's journal so far, trusted entries only
	// (journal.Trusted), when it runs again: what it did is reused.
	Replay []journal.Entry `msgpack:"replay,omitempty"`
}

// Result is how a thread ended.
type Result struct {
	Status event.Status `msgpack:"status"`
	Output string       `msgpack:"output,omitempty"`
	// Error says why a thread failed or was cancelled.
	Error string `msgpack:"error,omitempty"`
	// Usage is the tokens of this thread and its whole subtree; Own is the
	// part spent by this thread's own model calls.
	Usage model.Usage `msgpack:"usage"`
	Own   model.Usage `msgpack:"own"`
}

// Event is an event of type typ about t, stamped with its identity.
func (t *Thread) Event(typ event.Type) event.Event {
	return event.Event{Type: typ, RunID: t.RunID, ThreadID: t.ID, ParentID: t.ParentID, Depth: t.Depth, Name: t.Name}
}

// Failed is the result of a thread that failed for reason.
func Failed(reason string) Result { return Result{Status: event.Failed, Error: reason} }

// Cancelled is the result of a thread whose context ended, naming the cause
// when it is more than a plain cancel.
func Cancelled(ctx context.Context) Result {
	reason := "cancelled"
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		reason = cause.Error()
	}
	return Result{Status: event.Cancelled, Error: reason}
}

// SetHelper makes th, in place, the helper that the parent thread, as its
// owner holds it, asked for under name with task, after it handed off to the
// agents in handoffs: the spec from the current agent's helper template, the
// parent's cwd, the parent's permissions narrowed by every handoff, the
// at-most-once tools of the parent and of every handoff target, depth and
// path one below the parent's. It is the same helper the parent's own runner
// would build, so a remote parent needs to send nothing more than its
// arguments, which the caller checked first (tools.CheckHelperArgs). A
// thread is large (the agent's spec is in it), so it is written where the
// caller keeps it, not returned.
func SetHelper(th, parent *Thread, handoffs []string, id, name, task string) error {
	agent, perms := &parent.Agent, parent.Permissions
	// The at-most-once rule only grows along the way (spec.Harness.AddOnce).
	once := spec.Harness{}
	once.AddOnce(&parent.Agent.Harness)
	for _, h := range handoffs {
		a, ok := parent.Agents[h]
		if !ok {
			return fmt.Errorf("%w: handoff target %q", ErrUnknownAgent, h) // th is untouched
		}
		agent, perms = &a, perms.Narrow(a.Harness.Permissions)
		once.AddOnce(&a.Harness)
	}
	// Field by field into the result, as the spec is (spec.SetHelperSpec).
	th.RunID, th.ID, th.ParentID = parent.RunID, id, parent.ID
	th.Depth, th.Path = parent.Depth+1, parent.Path+"/"+name
	th.Name, th.Task = name, task
	th.Cwd, th.Permissions = parent.Cwd, slices.Clone(perms)
	spec.SetHelperSpec(&th.Agent, agent, name)
	th.Agent.Harness.AddOnce(&once)
	return nil
}

// ResolveCwd returns the absolute harness directory: specCwd resolved against
// base (itself resolved against the process's working directory).
func ResolveCwd(base, specCwd string) (string, error) {
	dir := specCwd
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cmp.Or(base, "."), dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("cwd %q: %w", dir, err)
	}
	return abs, nil
}
