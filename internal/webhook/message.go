package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// Event types webhooks are sent for.
const (
	// RunFinished: a run reached its final status.
	RunFinished = "run.finished"
	// ApprovalWaiting: a tool call of a run waits for a person to allow
	// or deny it.
	ApprovalWaiting = "approval.waiting"
)

// EventTypes is every event type a webhook may be sent for.
var EventTypes = []string{RunFinished, ApprovalWaiting}

// CheckEventType refuses a type no webhook is sent for.
func CheckEventType(t string) error {
	if slices.Contains(EventTypes, t) {
		return nil
	}
	return fmt.Errorf("%w: %q (known: %v)", ErrEventType, t, EventTypes)
}

// MaxOutput bounds the run output a run.finished body carries; a longer
// one is cut (on a rune boundary) and output_truncated says so. The
// whole output is in the run's record.
const MaxOutput = 16 << 10

// maxError bounds the error a run.finished body carries.
const maxError = 4 << 10

// Message is one webhook call to make, as the store keeps it: built once,
// so every attempt sends the same id and body.
type Message struct {
	// ID is the webhook-id header: the same on every attempt, unique to
	// this run's end and this URL.
	ID string `json:"id"`
	// URL is where the message goes.
	URL string `json:"url"`
	// RunID is the run the message is about; its events record each
	// delivery.
	RunID string `json:"run_id"`
	// Body is what is sent and signed.
	Body json.RawMessage `json:"body"`
}

// Payload is a webhook's JSON body, as the Standard Webhooks
// specification shapes it.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// RunData is the data of a run.finished body.
type RunData struct {
	RunID  string       `json:"run_id"`
	Status event.Status `json:"status"`
	// Output is the root's final answer, cut past MaxOutput.
	Output          string `json:"output,omitempty"`
	OutputTruncated bool   `json:"output_truncated,omitempty"`
	// Error says why the run failed or was cancelled.
	Error string `json:"error,omitempty"`
	// Totals sums up the run's tree: threads, refusals, tokens, cost.
	Totals     record.Totals `json:"totals"`
	Attempts   int           `json:"attempts,omitempty"`
	Resumes    int           `json:"resumes,omitempty"`
	CreatedAt  time.Time     `json:"created_at,omitzero"`
	StartedAt  time.Time     `json:"started_at,omitzero"`
	FinishedAt time.Time     `json:"finished_at,omitzero"`
	TraceID    string        `json:"trace_id,omitempty"`
}

// ForRun builds the run.finished message of rec, a final record, for each
// of urls (duplicates once). Each message's id is derived from the run,
// its resume count and the URL, so building them again after a crash
// gives the same ids, and the store keeps one of each.
func ForRun(rec record.Run, urls []string) ([]Message, error) {
	if !rec.Status.Final() {
		return nil, fmt.Errorf("webhook: run %s is %s, not final", rec.RunID, rec.Status)
	}
	data := RunData{RunID: rec.RunID, Status: rec.Status, Totals: rec.Sum(),
		Attempts: rec.Attempts, Resumes: rec.Resumes, CreatedAt: rec.CreatedAt, StartedAt: rec.StartedAt,
		FinishedAt: rec.FinishedAt, TraceID: rec.TraceID}
	data.Output, data.OutputTruncated = clip(rec.Output, MaxOutput)
	data.Error, _ = clip(rec.Error, maxError)
	at := rec.FinishedAt
	if at.IsZero() {
		at = rec.CreatedAt
	}
	body, err := json.Marshal(Payload{Type: RunFinished, Timestamp: at.UTC(), Data: data})
	if err != nil {
		return nil, fmt.Errorf("webhook: body of run %s: %w", rec.RunID, err)
	}
	return messages(rec.RunID, rec.RunID+"_"+strconv.Itoa(rec.Resumes), RunFinished, body, urls), nil
}

// ApprovalData is the data of an approval.waiting body: what a person is
// asked to decide, through `formica approve` or POST
// /v1/approvals/{id}. The call's arguments are left out (they may be
// large, and secret): GET /v1/approvals has them.
type ApprovalData struct {
	ID         string `json:"approval_id"`
	RunID      string `json:"run_id"`
	ThreadID   string `json:"thread_id"`
	ThreadPath string `json:"thread_path,omitempty"`
	Tool       string `json:"tool"`
	InDoubt    bool   `json:"in_doubt,omitempty"`
	// RequestedAt is when it was asked; ExpiresAt when it is denied if
	// nobody decides.
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
}

// ForApproval builds the approval.waiting message of a for each of urls
// (duplicates once), each id derived from the approval and the URL.
func ForApproval(a ApprovalData, urls []string) ([]Message, error) {
	body, err := json.Marshal(Payload{Type: ApprovalWaiting, Timestamp: a.RequestedAt.UTC(), Data: a})
	if err != nil {
		return nil, fmt.Errorf("webhook: body of approval %s: %w", a.ID, err)
	}
	return messages(a.RunID, a.ID, ApprovalWaiting, body, urls), nil
}

// messages is one message of body for each of urls (duplicates once).
func messages(run, key, typ string, body []byte, urls []string) []Message {
	var out []Message
	seen := map[string]bool{}
	for _, u := range urls {
		if seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, Message{ID: messageID(key, typ, u), URL: u, RunID: run, Body: body})
	}
	return out
}

// messageID is "msg_<key>_<hash of type and URL>", key naming what the
// message tells of (a run's end: the run and its resume count; an
// approval: its id): letters, digits, '_' and '-', fit for a header and a
// NATS message id.
func messageID(key, typ, url string) string {
	h := sha256.Sum256([]byte(typ + "\n" + url))
	return "msg_" + key + "_" + hex.EncodeToString(h[:8])
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
