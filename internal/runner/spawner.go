package runner

import (
	"context"

	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// SpawnRequest asks for one helper of a parent thread. It is what crosses the
// wire to a coordinator: the parent's identity, the helper's name and task, and
// its spec already resolved from the parent's helper template.
type SpawnRequest struct {
	RunID       string            `msgpack:"run_id"`
	ParentID    string            `msgpack:"parent_id"`
	ParentDepth int               `msgpack:"parent_depth"`
	ParentPath  string            `msgpack:"parent_path"`
	Name        string            `msgpack:"name"`
	Task        string            `msgpack:"task"`
	Agent       spec.Agent        `msgpack:"agent"`
	Cwd         string            `msgpack:"cwd"`
	Permissions tools.Permissions `msgpack:"permissions,omitempty"`
}

// Thread returns the helper thread the request describes, under id.
func (r *SpawnRequest) Thread(id string) Thread {
	return Thread{
		RunID:       r.RunID,
		ID:          id,
		ParentID:    r.ParentID,
		Depth:       r.ParentDepth + 1,
		Path:        r.ParentPath + "/" + r.Name,
		Name:        r.Name,
		Task:        r.Task,
		Agent:       r.Agent,
		Cwd:         r.Cwd,
		Permissions: r.Permissions,
	}
}

// Spawner admits, runs and waits for helpers. A refused spawn returns a
// *limits.Refusal; any other error means the helper could not be run at all.
type Spawner interface {
	Spawn(ctx context.Context, req SpawnRequest) (Result, error)
}
