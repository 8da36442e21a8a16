// Package journal is the data of a thread's journal: the entries each thread
// appends to JetStream as it lives (its start, every model response, tool
// result, approval, spawn, refusal and handoff, its end), the ids derived
// from them, the replay that lets a thread executed again skip the work it
// already did, and the transcript read back from it.
//
// It holds no NATS code: the store package keeps the stream, the runner
// writes and replays entries, the coordinator journals placements, and the
// API reads transcripts.
package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
)

// Kind names an entry.
type Kind string

// Every kind of entry. Threads write start, model, tool, approval,
// correction, handoff, spawn, refusal, elision, summary and end; the coordinator writes the
// end of a thread no worker reported, and the spawn of a helper it answers
// from that helper's journal. A placement is shown in transcripts where
// the first entry written under it is (its proof, Proof); journals written
// before proofs hold the coordinator's own placement entries.
const (
	KindStart      Kind = "start"
	KindModel      Kind = "model"
	KindTool       Kind = "tool"
	KindApproval   Kind = "approval"
	KindCorrection Kind = "correction"
	KindHandoff    Kind = "handoff"
	KindEnd        Kind = "end"
	KindPlacement  Kind = "placement"
	KindSpawn      Kind = "spawn"
	KindRefusal    Kind = "refusal"
	// KindElision replaces old tool results of the conversation by
	// markers, and KindSummary its oldest part by a summary, to keep the
	// next request inside the model's context window (see compact.go).
	// Both come before the model call of their turn.
	KindElision Kind = "elision"
	KindSummary Kind = "summary"
)

// Tool call statuses of a KindTool entry.
const (
	ToolOK     = "ok"     // the tool ran and answered
	ToolError  = "error"  // the tool failed; the text says why
	ToolDenied = "denied" // the permission policy or an approver said no
	// ToolHelperFailed is an agent call whose helper did not succeed: on
	// replay the helper is asked again (it carries on from its journal).
	ToolHelperFailed = "helper_failed"
	// ToolNotRun is a call the worker refused to start (its placement had
	// lapsed, or its start could not be journaled): on replay it runs.
	ToolNotRun = "not_run"
	// ToolStarted is a call of an at-most-once tool (harness.at_most_once)
	// about to run: it is stored before the tool runs, and its result
	// follows as another entry. A start with no result after it is a call
	// in doubt: on replay it is not run again.
	ToolStarted = "started"
	// ToolInDoubt answers a call in doubt without running it again: it
	// may or may not have taken effect.
	ToolInDoubt = "in_doubt"
)

// Entry is one thing a thread did. Only the fields of its Kind are set.
// Nothing secret enters an entry: provider credentials live only in the
// environment of the processes that call models, and placement tokens are
// journaled as digests (Digest).
type Entry struct {
	Kind Kind      `json:"kind" msgpack:"k"`
	Time time.Time `json:"time" msgpack:"at"`
	// Turn is the model call the entry belongs to, counted from 0 in the
	// thread (schema corrections count as turns).
	Turn int `json:"turn" msgpack:"turn"`

	// start
	Thread *ThreadInfo `json:"thread,omitempty" msgpack:"thread,omitempty"`
	System string      `json:"system,omitempty" msgpack:"system,omitempty"`
	Task   string      `json:"task,omitempty" msgpack:"task,omitempty"`
	Spec   *spec.Agent `json:"spec,omitempty" msgpack:"spec,omitempty"`
	// Model is the model reference (start, model).
	Model string `json:"model,omitempty" msgpack:"model,omitempty"`

	// model: the assistant message with its tool calls.
	Message   *model.Message `json:"message,omitempty" msgpack:"message,omitempty"`
	Usage     model.Usage    `json:"usage,omitzero" msgpack:"usage,omitempty"`
	LatencyMS int64          `json:"latency_ms,omitempty" msgpack:"latency_ms,omitempty"`

	// tool, approval, spawn, refusal
	CallID     string `json:"call_id,omitempty" msgpack:"call_id,omitempty"`
	Tool       string `json:"tool,omitempty" msgpack:"tool,omitempty"`
	Arguments  string `json:"arguments,omitempty" msgpack:"arguments,omitempty"`
	Result     string `json:"result,omitempty" msgpack:"result,omitempty"`
	ToolStatus string `json:"tool_status,omitempty" msgpack:"tool_status,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty" msgpack:"duration_ms,omitempty"`
	// Allow is an approval's decision; Reason why (approval, refusal).
	Allow  bool   `json:"allow,omitempty" msgpack:"allow,omitempty"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
	// InDoubt marks an approval of a call in doubt (harness.in_doubt ask):
	// allow ran it again, deny reported it in doubt. It is no decision of
	// the permission policy, which replay reuses.
	InDoubt bool `json:"in_doubt,omitempty" msgpack:"in_doubt,omitempty"`
	// Child is the helper a spawn started; Name its name.
	Child string `json:"child_id,omitempty" msgpack:"child,omitempty"`
	Name  string `json:"name,omitempty" msgpack:"name,omitempty"`

	// correction: the user message asking for output that fits the
	// schema; summary: the summary.
	Content string `json:"content,omitempty" msgpack:"content,omitempty"`
	// handoff: the agent that carries on.
	Target string `json:"target,omitempty" msgpack:"target,omitempty"`

	// elision: the tool results replaced by markers.
	Elided []Elided `json:"elided,omitempty" msgpack:"elided,omitempty"`
	// summary: how many messages after the task the summary replaced
	// (Content is the summary; Model, Usage and LatencyMS its model call).
	Summarized int `json:"summarized,omitempty" msgpack:"summarized,omitempty"`
	// elision, summary: the context window, and the request's estimated
	// tokens before and after.
	Window       int64 `json:"context_window,omitempty" msgpack:"window,omitempty"`
	TokensBefore int64 `json:"tokens_before,omitempty" msgpack:"tokens_before,omitempty"`
	TokensAfter  int64 `json:"tokens_after,omitempty" msgpack:"tokens_after,omitempty"`

	// end
	Status event.Status `json:"status,omitempty" msgpack:"status,omitempty"`
	Output string       `json:"output,omitempty" msgpack:"output,omitempty"`
	Error  string       `json:"error,omitempty" msgpack:"error,omitempty"`
	// Own is the thread's own usage; Usage (on an end) its subtree's.
	Own model.Usage `json:"own,omitzero" msgpack:"own,omitempty"`

	// placement: which worker and attempt own the thread from then on.
	Worker  string `json:"worker,omitempty" msgpack:"worker,omitempty"`
	Attempt int    `json:"attempt,omitempty" msgpack:"attempt,omitempty"`

	// Placement is the digest of the placement token the writer held: a
	// message header, not part of the body. Entries the coordinator writes
	// carry none.
	Placement string `json:"-" msgpack:"-"`
	// Proof is the placement the entry was written under, set when read
	// if the entry carries a proof that checks (see Proof): it counts on
	// replay.
	Proof *Proof `json:"-" msgpack:"-"`
	// ThreadID is the thread whose journal holds the entry, set when read.
	ThreadID string `json:"-" msgpack:"-"`
	// Seq is the entry's sequence in the stream, set when read.
	Seq uint64 `json:"seq" msgpack:"-"`
	// ByCoordinator says the entry came from the coordinator's subject, set
	// when read.
	ByCoordinator bool `json:"-" msgpack:"-"`
}

// ThreadInfo is who a thread is, journaled in its start entry.
type ThreadInfo struct {
	ID       string `json:"id" msgpack:"id"`
	ParentID string `json:"parent_id,omitempty" msgpack:"parent_id,omitempty"`
	Name     string `json:"name" msgpack:"name"`
	Path     string `json:"path" msgpack:"path"`
	Depth    int    `json:"depth" msgpack:"depth"`
}

// Digest is what the journal keeps of a placement token: enough to tell
// which placement wrote an entry, useless for claiming that placement.
func Digest(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("formica placement\x00" + token))
	return hex.EncodeToString(sum[:16])
}
