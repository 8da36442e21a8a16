package runner

import (
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// Thread is one executing agent, root or helper: everything a runner needs to
// run it, as plain data so it can travel to another process.
type Thread struct {
	RunID    string `msgpack:"run_id"`
	ID       string `msgpack:"id"`
	ParentID string `msgpack:"parent_id,omitempty"`
	Depth    int    `msgpack:"depth"`
	// Path is "root/name/..." from the run's root to this thread, for approvals.
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
	Permissions tools.Permissions `msgpack:"permissions,omitempty"`
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

func (t *Thread) event(typ event.Type) event.Event {
	return event.Event{Type: typ, RunID: t.RunID, ThreadID: t.ID, ParentID: t.ParentID, Depth: t.Depth, Name: t.Name}
}
