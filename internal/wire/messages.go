package wire

import (
	"time"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

// SpawnRequest asks the run's coordinator for a helper (worker → coordinator).
// It carries only what the worker cannot usefully lie about: which of its
// placed threads asks (with that placement's token) and the model's
// arguments. The coordinator derives the helper's spec, cwd, permissions,
// depth and path from the parent thread it holds. The answer is a
// SpawnResult (the helper's end, or a refusal); while an admitted helper
// runs, a Progress naming it each heartbeat keeps the request alive.
type SpawnRequest struct {
	RunID    string `msgpack:"run_id"`
	ParentID string `msgpack:"parent_id"`
	// Token is the parent's placement token (ExecRequest.Token).
	Token string `msgpack:"token"`
	// CallID is the parent's tool call id of this spawn.
	CallID string `msgpack:"call_id,omitempty"`
	Name   string `msgpack:"name"`
	Task   string `msgpack:"task"`
	// Handoffs names the agents the parent has handed off to, in order,
	// each one of the parent thread's handoff targets; the helper is made
	// from the last one's template.
	Handoffs []string `msgpack:"handoffs,omitempty"`
	// ParentSpent is what the parent's model calls spent since its last
	// budget grant, which it gives back while it waits.
	ParentSpent model.Usage `msgpack:"parent_spent,omitzero"`
	// Events are the parent's events so far (see Progress.Events).
	Events Events `msgpack:"events,omitempty"`
}

// ApprovalRequest asks the run's coordinator to decide an `ask` (worker →
// coordinator), with the asking thread's placement token. The coordinator
// passes on only the embedded request, with the path it knows.
type ApprovalRequest struct {
	policy.ApprovalRequest `msgpack:",inline"`
	Token                  string `msgpack:"token"`
	// Events are the thread's events so far (see Progress.Events).
	Events Events `msgpack:"events,omitempty"`
}

// ApprovalDecide is a person's answer to a held approval (client →
// coordinator, on SubjectApprovalDecide). The coordinator answers OK, or an
// error coded CodeNotFound (no such approval) or CodeConflict (already
// decided or timed out).
type ApprovalDecide struct {
	ID    string `msgpack:"id"`
	Allow bool   `msgpack:"allow"`
}

// ThreadCancel asks the run's coordinator to cancel a helper of one of the
// sender's placed threads (worker → coordinator).
type ThreadCancel struct {
	RunID    string `msgpack:"run_id"`
	ParentID string `msgpack:"parent_id"`
	Token    string `msgpack:"token"`
	ThreadID string `msgpack:"thread_id"`
	Reason   string `msgpack:"reason,omitempty"`
}

// SpawnResult is the coordinator's final answer to a SpawnRequest. A refused
// spawn has Refusal set and no thread.
type SpawnResult struct {
	Refusal limits.Reason `msgpack:"refusal,omitempty"`
	// Budget is the spent budget of a limits.ReasonBudget refusal.
	Budget   limits.Kind   `msgpack:"budget,omitempty"`
	ThreadID string        `msgpack:"thread_id,omitempty"`
	Worker   string        `msgpack:"worker,omitempty"`
	Result   thread.Result `msgpack:"result"`
}

// ExecRequest places a thread on a worker (coordinator → worker). The worker
// answers ExecAccepted, ExecBusy or ExecSetupMissing at once, then Progress
// every heartbeat interval, then ExecResult.
type ExecRequest struct {
	Thread thread.Thread `msgpack:"thread"`
	// SetupHash, when set, names the thread's setup (see
	// ThreadSetup), which Thread then goes without; Setup is the
	// setup itself (EncodeSetup), sent when the worker may not hold it.
	SetupHash string `msgpack:"setup_hash,omitempty"`
	Setup     []byte `msgpack:"setup,omitempty"`
	// Coordinator is the id of the coordinator that owns the run: where the
	// thread's spawns and approval requests go.
	Coordinator string `msgpack:"coordinator"`
	// Epoch is the coordinator incarnation's random id; a heartbeat with
	// another epoch means the placement's coordinator restarted.
	Epoch   string `msgpack:"epoch"`
	Attempt int    `msgpack:"attempt"`
	// Token is the placement's secret: every message the worker sends about
	// the thread carries it, and nothing else proves the placement to the
	// coordinator.
	Token string `msgpack:"token"`
	// Proof is the placement's proof for the journal (journal.Signer.Sign,
	// over the token's digest): the thread journals it with every entry,
	// and only entries under a proof that checks count on replay. A
	// coordinator that keeps no journal sends none.
	Proof string `msgpack:"proof,omitempty"`
	// Uptime is the coordinator's monotonic age when it sent the request
	// (see CoordHeartbeat.Uptime).
	Uptime time.Duration `msgpack:"uptime"`
	// Grant is the thread's first share of its budgets; the worker renews
	// it with BudgetRenew when it is used up.
	Grant limits.Grant `msgpack:"grant"`
}

// BudgetRenew reports what a thread spent since its last grant and asks
// for the next one (worker → coordinator), with the thread's placement
// token; the answer is a limits.Grant.
type BudgetRenew struct {
	RunID        string `msgpack:"run_id"`
	ThreadID     string `msgpack:"thread_id"`
	Token        string `msgpack:"token"`
	InputTokens  int64  `msgpack:"input_tokens"`
	OutputTokens int64  `msgpack:"output_tokens"`
	// CostMicros is what those calls cost, in micro-dollars.
	CostMicros int64 `msgpack:"cost_micros,omitempty"`
	// NeedMicros is the next model call's estimated cost in micro-dollars,
	// which a usd budget reserves for it.
	NeedMicros int64 `msgpack:"need_micros,omitempty"`
}

// PlacementCheck asks the run's coordinator whether the sender's placement
// of a thread is still current (worker → coordinator), before a tool call
// that follows a stretch in which the worker's process stood still. The
// answer is TypeOK, or an error: fenced for a superseded placement.
type PlacementCheck struct {
	RunID    string `msgpack:"run_id"`
	ThreadID string `msgpack:"thread_id"`
	Token    string `msgpack:"token"`
}

// ExecAccepted says the worker took the thread.
type ExecAccepted struct {
	Worker string `msgpack:"worker"`
}

// ExecBusy says the worker has no free slot (or is draining); place elsewhere.
type ExecBusy struct {
	Worker   string `msgpack:"worker"`
	Draining bool   `msgpack:"draining,omitempty"`
}

// Progress is a heartbeat on a long request: the work goes on. A worker's
// progress on a placed thread carries the placement's token; a
// coordinator's on a spawn names the admitted helper (ThreadID).
type Progress struct {
	ThreadID string `msgpack:"thread_id,omitempty"`
	Token    string `msgpack:"token,omitempty"`
	// Events are the thread's events since the worker's last message about
	// it (worker → coordinator), which the coordinator publishes once the
	// token vouches for them.
	Events Events `msgpack:"events,omitempty"`
}

// ExecResult is how a placed thread ended, with the placement's token.
type ExecResult struct {
	ThreadID string        `msgpack:"thread_id"`
	Worker   string        `msgpack:"worker"`
	Token    string        `msgpack:"token"`
	Result   thread.Result `msgpack:"result"`
	// Events are the thread's last events (see Progress.Events).
	Events Events `msgpack:"events,omitempty"`
}

// Cancel stops threads (coordinator → worker) or, with no thread ids, a whole
// run (client → coordinator).
type Cancel struct {
	RunID     string   `msgpack:"run_id"`
	ThreadIDs []string `msgpack:"thread_ids,omitempty"`
	Reason    string   `msgpack:"reason,omitempty"`
}

// WorkerHeartbeat announces a worker and its load; the first one is its
// registration, and silence for three intervals means it is lost.
type WorkerHeartbeat struct {
	ID    string `msgpack:"id"`
	Host  string `msgpack:"host"`
	Slots int    `msgpack:"slots"`
	// Running counts threads holding a slot; Parked those waiting on helpers.
	Running  int       `msgpack:"running"`
	Parked   int       `msgpack:"parked"`
	Draining bool      `msgpack:"draining,omitempty"`
	Started  time.Time `msgpack:"started"`
	// Interval is the worker's heartbeat period.
	Interval time.Duration `msgpack:"interval"`
	// Sandbox is "on" when the worker's tool calls run in the sandbox and
	// "off" when it was started with --sandbox off.
	Sandbox string `msgpack:"sandbox,omitempty"`
	// MCP names the MCP servers configured on the worker (--mcp-config),
	// so threads that name them are placed here.
	MCP []string `msgpack:"mcp,omitempty"`
	// Leaving is the worker's last heartbeat as it stops: it is gone, not
	// lost.
	Leaving bool `msgpack:"leaving,omitempty"`
}

// WorkerInfo is what a coordinator knows of one worker: the body of its
// answer to TypeWorkersList, and what the API lists.
type WorkerInfo struct {
	ID       string    `json:"id"`
	Host     string    `json:"host"`
	Slots    int       `json:"slots"`
	Running  int       `json:"running"`
	Parked   int       `json:"parked"`
	Placed   int       `json:"placed"`
	Draining bool      `json:"draining"`
	LastSeen time.Time `json:"last_seen"`
	// Sandbox is "on" or "off" (tool calls confined or not), as the
	// worker's heartbeat says.
	Sandbox string `json:"sandbox"`
	// MCP names the MCP servers configured on the worker.
	MCP []string `json:"mcp,omitempty"`
}

// Assets counts the JetStream streams of the cluster's account and their
// consumers, by kind (a stream's kind follows from its name; a consumer's
// is its stream's): the body of a coordinator's answer to TypeAssetsList,
// and what GET /v1/assets and `formica assets` show.
type Assets struct {
	Streams   int `json:"streams"`
	Consumers int `json:"consumers"`
	// Kinds has every kind, in a fixed order, those with no stream
	// included.
	Kinds []AssetKind `json:"kinds"`
	// CountedAt is when the coordinator listed the streams.
	CountedAt time.Time `json:"counted_at"`
}

// AssetKind is one kind's count in Assets.
type AssetKind struct {
	Kind      string `json:"kind"`
	Streams   int    `json:"streams"`
	Consumers int    `json:"consumers"`
	// Names are the kind's streams, sorted, at most MaxAssetNames of them.
	Names []string `json:"names,omitempty"`
}

// MaxAssetNames bounds the stream names one kind of Assets lists.
const MaxAssetNames = 100

// CoordHeartbeat tells workers a coordinator is alive; workers stop the
// threads of a coordinator that has gone silent.
type CoordHeartbeat struct {
	ID       string        `msgpack:"id"`
	Interval time.Duration `msgpack:"interval"`
	// Epoch is this incarnation's random id: placements made under another
	// epoch of the same id are superseded.
	Epoch string `msgpack:"epoch"`
	// Uptime is the coordinator's monotonic age at sending. A worker maps
	// it onto its own clock to tell a heartbeat sent just now from one that
	// sat in a buffer while the worker was frozen.
	Uptime time.Duration `msgpack:"uptime"`
	// Fenced lists recently superseded placements; their workers cancel them.
	Fenced []Fenced `msgpack:"fenced,omitempty"`
}

// Fenced names a superseded placement: a thread's attempt on a worker.
type Fenced struct {
	Worker   string `msgpack:"worker"`
	ThreadID string `msgpack:"thread_id"`
	Attempt  int    `msgpack:"attempt"`
}

// RunSubmit starts a run on a coordinator (client → coordinator).
type RunSubmit struct {
	RunID  string                `msgpack:"run_id"`
	Task   string                `msgpack:"task"`
	Agent  spec.Agent            `msgpack:"agent"`
	Agents map[string]spec.Agent `msgpack:"agents,omitempty"`
	Limits limits.Config         `msgpack:"limits"`
	// Budget bounds the run's whole tree; Timeout is its deadline (zero:
	// the coordinator's default for queued runs, none otherwise).
	Budget  limits.Budget `msgpack:"budget,omitempty"`
	Timeout time.Duration `msgpack:"timeout,omitempty"`
	// Cwd is the harness directory on the workers.
	Cwd string `msgpack:"cwd"`
	// Approver is the subject that answers the run's `ask` decisions; empty
	// denies them.
	Approver string `msgpack:"approver,omitempty"`
	// Webhooks are URLs the submitter asks to be called when the run
	// ends, besides the coordinators' own; each must be under a prefix
	// the coordinator allows.
	Webhooks []string `msgpack:"webhooks,omitempty"`
}

// Ask is what the submission asks of its coordinator, for
// limits.Ceilings.Check: the one rule the API, the CLI and the coordinator
// apply.
func (s *RunSubmit) Ask() limits.Ask {
	return limits.Ask{Limits: s.Limits, Budget: s.Budget, TaskBytes: len(s.Task), Timeout: s.Timeout}
}

// RunCancel asks for a whole run to be cancelled (client → coordinator, on
// SubjectCancelRequest), and is what a client appends to the run's subject
// of the cancel-requests stream so a cancel sent while no coordinator runs
// is kept. Resumes is the record's resume count when it was asked: a
// request counts only for that execution, never for a later resume.
type RunCancel struct {
	RunID   string `msgpack:"run_id"`
	Resumes int    `msgpack:"resumes,omitempty"`
}

// RunResume asks a coordinator to queue a failed or cancelled run again
// under its id (client → coordinator, on SubjectResume).
type RunResume struct {
	RunID string `msgpack:"run_id"`
}

// RunAccepted acknowledges a submission.
type RunAccepted struct {
	RunID       string `msgpack:"run_id"`
	Coordinator string `msgpack:"coordinator"`
}

// RunResult is the final reply to a RunSubmit: the run's whole record.
type RunResult struct {
	Record record.Run `msgpack:"record"`
}
