package client

import (
	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/wire"
)

// Submissions (POST /v1/runs).
type (
	// SubmitRequest is the body of a submission; Task is required.
	SubmitRequest = api.SubmitBody
	// Budget bounds a submitted run's tree; zero amounts are unbounded.
	Budget = api.BudgetBody
)

// Runs and their parts (GET /v1/runs, GET /v1/runs/{id}).
type (
	// Run is a run's record.
	Run = record.Run
	// Status is a run's or a thread's status.
	Status = event.Status
	// RunThread is one thread as a run's record holds it.
	RunThread = record.Thread
	// Refusals counts the helpers a run's limits refused.
	Refusals = record.Refusals
	// Totals sums a run's threads.
	Totals = record.Totals
	// Usage is tokens and cost of model calls.
	Usage = model.Usage
	// BudgetUse is how much of each bounded amount a run has used.
	BudgetUse = limits.Use
	// BudgetKind names a bounded amount (tokens, usd, ...).
	BudgetKind = limits.Kind
	// Amount is one bounded amount's use and limit.
	Amount = limits.Amount
	// Agent is an agent spec, as a run's record holds it.
	Agent = spec.Agent
)

// Run statuses.
const (
	Queued    Status = record.Queued
	Running   Status = event.Running
	Succeeded Status = event.Succeeded
	Failed    Status = event.Failed
	Cancelled Status = event.Cancelled
)

// Events (GET /v1/runs/{id}/events).
type (
	// Event is one thing that happened in a run.
	Event = event.Event
	// EventType names an event, such as run.finished.
	EventType = event.Type
)

// RunFinished is the type of the event that ends a run's execution.
const RunFinished EventType = event.RunFinished

// Threads and transcripts (GET /v1/runs/{id}/threads[/{thread}]).
type (
	// Thread is one thread of a run, from its journal.
	Thread = api.ThreadSummary
	// Transcript is one thread's conversation, from its journal.
	Transcript = journal.Transcript
	// TranscriptEntry is one entry of a transcript.
	TranscriptEntry = journal.Entry
	// EntryKind names what a transcript entry records.
	EntryKind = journal.Kind
	// ThreadInfo is the thread a transcript's start entry names.
	ThreadInfo = journal.ThreadInfo
	// Elided is an old tool result left out to fit a context window.
	Elided = journal.Elided
	// Message is a model message of a transcript entry.
	Message = model.Message
	// ToolCall is a tool call a model message asks for.
	ToolCall = model.ToolCall
)

// Approvals, workers and assets.
type (
	// Approval is a tool call waiting for a person's allow or deny.
	Approval = api.Approval
	// DecideRequest is the body of an answer to an approval.
	DecideRequest = api.DecideBody
	// Worker is a live worker.
	Worker = wire.WorkerInfo
	// Assets counts the cluster's JetStream streams and consumers by kind.
	Assets = wire.Assets
	// AssetKind is one kind of asset and its count.
	AssetKind = wire.AssetKind
)

// Answers of the API.
type (
	SubmitResponse       = api.SubmitResponse
	CancelResponse       = api.CancelResponse
	ThreadCancelResponse = api.ThreadCancelResponse
	ResumeResponse       = api.ResumeResponse
	DecideResponse       = api.DecideResponse
	// ErrorBody is the body of every error answer.
	ErrorBody = api.ErrorBody
)
