package api

import (
	"context"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/wire"
)

// Backend is everything the API needs from the rest of the system. The API
// owns it (STYLE lesson 3); the coordinator side adapts to it.
//
// Methods wrap ErrNotFound, ErrConflict, ErrInvalid or ErrUnavailable so the
// API can answer 404, 409, 400 or 503; any other error is a 500 whose text is
// logged, not shown to the client.
type Backend interface {
	// Submit queues a run and returns its id. When req.ID is empty the
	// backend chooses the id. Submitting the same id twice is not an error:
	// it returns the same run id and starts nothing new; an id taken by a
	// run of another task or spec is ErrConflict.
	Submit(ctx context.Context, req SubmitRequest) (runID string, err error)
	// ListRuns returns up to limit run records, newest first, only those with
	// the given status when status is not empty, starting after the page
	// cursor page ("" for the newest), and the cursor of the next page ("" at
	// the end). A bad cursor is ErrInvalid.
	ListRuns(ctx context.Context, status string, limit int, page string) (runs []record.Run, next string, err error)
	// GetRun returns one run's record (ErrNotFound when there is none).
	GetRun(ctx context.Context, id string) (record.Run, error)
	// Events replays the run's stored events with a sequence above after,
	// then follows live ones, calling send for each in sequence order, until
	// the run has finished (it returns nil), ctx ends, or send fails (it
	// returns that error).
	Events(ctx context.Context, id string, after uint64, send func(seq uint64, e event.Event) error) error
	// CancelRun cancels a run's whole tree: ErrNotFound for an unknown run,
	// ErrConflict for a finished one.
	CancelRun(ctx context.Context, id string) error
	// CancelThread cancels one thread of a running run and its subtree; its
	// parent sees the helper fail and goes on. ErrNotFound for an unknown
	// run or thread, ErrConflict when the run is not running.
	CancelThread(ctx context.Context, runID, threadID string) error
	// ResumeRun runs a failed or cancelled run again under the same id,
	// reusing every finished thread's work from its journal: ErrNotFound
	// for an unknown run, ErrConflict for one that is not failed or
	// cancelled.
	ResumeRun(ctx context.Context, id string) error
	// Threads lists a run's threads from its journal, root first, then in
	// the order they started (ErrNotFound for an unknown run).
	Threads(ctx context.Context, id string) ([]ThreadSummary, error)
	// Transcript returns one thread's transcript from its journal
	// (ErrNotFound when the run or thread has none).
	Transcript(ctx context.Context, id, thread string) (Transcript, error)
	// ListApprovals returns the approvals waiting for a person.
	ListApprovals(ctx context.Context) ([]Approval, error)
	// Decide answers a pending approval: ErrNotFound for an unknown one,
	// ErrConflict when it was already answered (or timed out).
	Decide(ctx context.Context, id string, allow bool) error
	// Workers returns the live workers.
	Workers(ctx context.Context) ([]wire.WorkerInfo, error)
	// Assets counts the cluster's JetStream streams and consumers by kind.
	Assets(ctx context.Context) (wire.Assets, error)
	// Ready returns nil when NATS and JetStream are usable, else why not.
	Ready(ctx context.Context) error
}

// SubmitRequest is a validated POST /v1/runs.
type SubmitRequest struct {
	// Task is the root agent's task, never empty.
	Task string
	// Model is a model reference overriding the agent's; empty keeps it.
	Model string
	// Agent is the root agent's spec; nil means the backend's default agent.
	Agent *spec.Agent
	// Agents is every agent of the submitted spec by name, the root
	// included (spec.File.Catalog): where handoff targets are looked up.
	// Nil when Agent is nil.
	Agents map[string]spec.Agent
	// ID is the caller's run id (letters, digits, '-', '_'; at most 64
	// characters), or empty for the backend to choose one.
	ID string
	// MaxDepth and MaxThreads are the run's agent_max_depth and
	// agent_max_threads; zero means the defaults, never negative.
	MaxDepth, MaxThreads int
	// Budget bounds the run's tree; its set amounts override the agent
	// spec's budget. Timeout is the run's deadline (zero: the
	// coordinator's --run-timeout).
	Budget  limits.Budget
	Timeout time.Duration
	// Webhooks are URLs to call when the run ends; the coordinator
	// refuses those under none of its allowed prefixes.
	Webhooks []string
}

// Approval is a tool call waiting for a person's allow or deny.
type Approval struct {
	ID       string `json:"id"`
	RunID    string `json:"run_id"`
	ThreadID string `json:"thread_id"`
	// ThreadPath is the names from the root down to the asking thread (formica/name/...).
	ThreadPath string `json:"thread_path"`
	Tool       string `json:"tool"`
	// Arguments are the exact arguments of the call, as JSON text.
	Arguments string `json:"arguments"`
	// InDoubt asks whether to run again a call of an at-most-once tool
	// that a failure cut before its result: it may or may not have taken
	// effect. Allow runs it again; deny tells the agent it is in doubt.
	InDoubt     bool      `json:"in_doubt,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
}
