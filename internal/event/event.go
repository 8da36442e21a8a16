// Package event defines what happens in a run, as seen by everything that
// watches one: the CLI's live tree, run records, and (in a cluster) the events
// stream. Producers emit through a Sink and never wait on their watchers.
package event

import (
	"time"

	"github.com/formica-run/formica/internal/model"
)

// Type names an event.
type Type string

// Every event DESIGN lists.
const (
	RunQueued         Type = "run.queued"
	RunStarted        Type = "run.started"
	RunFinished       Type = "run.finished"
	ThreadSpawned     Type = "thread.spawned"
	ThreadRefused     Type = "thread.refused"
	ThreadWaiting     Type = "thread.waiting" // no worker slot free yet; Reason says so
	ThreadStarted     Type = "thread.started"
	ThreadFinished    Type = "thread.finished"
	ThreadHandoff     Type = "thread.handoff"
	ThreadReplaced    Type = "thread.replaced"
	ModelCall         Type = "model.call"
	ModelWaiting      Type = "model.waiting" // a model call waits for its endpoint's quota or to retry; Reason says why
	ToolCall          Type = "tool.call"
	ToolResult        Type = "tool.result"
	ApprovalRequested Type = "approval.requested"
	ApprovalResolved  Type = "approval.resolved"
	WorkerJoined      Type = "worker.joined"
	WorkerLost        Type = "worker.lost"
	WebhookDelivered  Type = "webhook.delivered" // a run's webhook call was answered 2xx
	WebhookFailed     Type = "webhook.failed"    // a run's webhook call failed; Reason says why
)

// AfterEnd reports whether t is about a run that has ended rather than a
// step of it (a webhook call that tells of its end): such events come
// after the run's run.finished, and watchers that stop at the run's end
// do not take them for the start of another execution.
func (t Type) AfterEnd() bool { return t == WebhookDelivered || t == WebhookFailed }

// Status of a thread or run.
type Status string

// Statuses; the last three are final.
const (
	Running   Status = "running"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Event is one thing that happened. Every event names its run and, where it
// concerns a thread, the thread, its parent, depth and name.
type Event struct {
	Type     Type      `json:"type" msgpack:"type"`
	Time     time.Time `json:"time" msgpack:"time"`
	RunID    string    `json:"run_id" msgpack:"run_id"`
	ThreadID string    `json:"thread_id,omitempty" msgpack:"thread_id,omitempty"`
	ParentID string    `json:"parent_id,omitempty" msgpack:"parent_id,omitempty"`
	Depth    int       `json:"depth" msgpack:"depth"`
	Name     string    `json:"name,omitempty" msgpack:"name,omitempty"`

	// Status is the final status (thread.finished, run.finished).
	Status Status `json:"status,omitempty" msgpack:"status,omitempty"`
	// Reason explains a refusal, failure, handoff, wait or approval decision.
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
	// Worker is where the thread runs (thread.started) in a cluster, the
	// worker it left (thread.replaced), or the worker joined or lost.
	Worker string `json:"worker,omitempty" msgpack:"worker,omitempty"`
	// Model is the model reference (model.call).
	Model string `json:"model,omitempty" msgpack:"model,omitempty"`
	// Endpoint is the model endpoint whose quota a call waits for
	// (model.waiting; empty when the call waits to retry).
	Endpoint string      `json:"endpoint,omitempty" msgpack:"endpoint,omitempty"`
	Usage    model.Usage `json:"usage,omitzero" msgpack:"usage,omitempty"`
	Latency  Duration    `json:"latency_ms,omitempty" msgpack:"latency_ms,omitempty"`
	// Tool, CallID and Arguments describe a tool call; Output its result.
	Tool      string `json:"tool,omitempty" msgpack:"tool,omitempty"`
	CallID    string `json:"call_id,omitempty" msgpack:"call_id,omitempty"`
	Arguments string `json:"arguments,omitempty" msgpack:"arguments,omitempty"`
	Output    string `json:"output,omitempty" msgpack:"output,omitempty"`
	// Decision is allow or deny (approval.resolved).
	Decision string `json:"decision,omitempty" msgpack:"decision,omitempty"`
	// InDoubt marks a call of an at-most-once tool that a failure cut
	// before its result: on tool.result, the call was not run again and
	// may or may not have taken effect; on approval.requested, a person
	// is asked whether it runs again.
	InDoubt bool `json:"in_doubt,omitempty" msgpack:"in_doubt,omitempty"`
	// URL is where a webhook call went (webhook.*): scheme, host and
	// path, without userinfo, query or fragment.
	URL string `json:"url,omitempty" msgpack:"url,omitempty"`
	// Attempt counts a webhook message's calls, this one included; a call
	// that failed on the last attempt has Status failed.
	Attempt int `json:"attempt,omitempty" msgpack:"attempt,omitempty"`
	// StatusCode is the receiver's HTTP answer to a webhook call; absent
	// when none came.
	StatusCode int `json:"status_code,omitempty" msgpack:"status_code,omitempty"`
}

// Waiting is the status of a thread whose placement waits for a worker slot.
const Waiting Status = "waiting"

// WaitingForWorker starts the Reason of thread.waiting.
const WaitingForWorker = "waiting for a worker"

// WaitingForQuota starts the Reason of a model.waiting whose call waits
// for its endpoint's quota ("waiting for quota of <endpoint>: <why>").
const WaitingForQuota = "waiting for quota"

// WaitingToRetry starts the Reason of a model.waiting whose call waits to
// retry a failed attempt: "retrying: <cause>, <wait>", the cause being the
// HTTP status ("429", "503") or, with none, what the attempt met
// ("timeout", "connection reset", ...), e.g. "retrying: 429, 2s".
const WaitingToRetry = "retrying"

// Final reports whether s ends a thread or run.
func (s Status) Final() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Sink receives events. Emit must not block for long: it runs on the agent loop.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// Discard drops every event.
var Discard Sink = SinkFunc(func(Event) {})

// Clip bounds text an event carries (a tool's output, a run's output); the
// full text stays with the model or in the run record.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
