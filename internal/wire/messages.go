package wire

import (
	"time"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
)

// SpawnRequest asks the run's coordinator for a helper (worker → coordinator).
type SpawnRequest = runner.SpawnRequest

// SpawnResult is the coordinator's final answer to a SpawnRequest. A refused
// spawn has Refusal set and no thread.
type SpawnResult struct {
	Refusal  limits.Reason `msgpack:"refusal,omitempty"`
	ThreadID string        `msgpack:"thread_id,omitempty"`
	Worker   string        `msgpack:"worker,omitempty"`
	Result   runner.Result `msgpack:"result"`
}

// ExecRequest places a thread on a worker (coordinator → worker). The worker
// answers ExecAccepted or ExecBusy at once, then Progress every heartbeat
// interval, then ExecResult.
type ExecRequest struct {
	Thread runner.Thread `msgpack:"thread"`
	// Coordinator is the id of the coordinator that owns the run: where the
	// thread's spawns and approval requests go.
	Coordinator string `msgpack:"coordinator"`
	Attempt     int    `msgpack:"attempt"`
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

// Progress is a heartbeat on a long request: the work goes on.
type Progress struct {
	ThreadID string `msgpack:"thread_id,omitempty"`
}

// ExecResult is how a placed thread ended.
type ExecResult struct {
	ThreadID string        `msgpack:"thread_id"`
	Worker   string        `msgpack:"worker"`
	Result   runner.Result `msgpack:"result"`
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
}

// CoordHeartbeat tells workers a coordinator is alive; workers stop the
// threads of a coordinator that has gone silent.
type CoordHeartbeat struct {
	ID       string        `msgpack:"id"`
	Interval time.Duration `msgpack:"interval"`
}

// RunSubmit starts a run on a coordinator (client → coordinator).
type RunSubmit struct {
	RunID  string                `msgpack:"run_id"`
	Task   string                `msgpack:"task"`
	Agent  spec.Agent            `msgpack:"agent"`
	Agents map[string]spec.Agent `msgpack:"agents,omitempty"`
	Limits limits.Config         `msgpack:"limits"`
	// Cwd is the harness directory on the workers.
	Cwd string `msgpack:"cwd"`
	// Approver is the subject that answers the run's `ask` decisions; empty
	// denies them.
	Approver string `msgpack:"approver,omitempty"`
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
