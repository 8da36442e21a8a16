package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/tracing"
)

// List sizes of GET /v1/runs.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

// runStatuses are the statuses GET /v1/runs?status= accepts.
var runStatuses = []string{string(record.Queued), string(event.Running),
	string(event.Succeeded), string(event.Failed), string(event.Cancelled)}

// SubmitBody is the body of POST /v1/runs.
type SubmitBody struct {
	// Task is the root agent's task; required.
	Task string `json:"task"`
	// Model is a model reference ("openai:gpt-4o", "sim") overriding the
	// agent's.
	Model string `json:"model,omitempty"`
	// Agent is an agent spec file as JSON: the root agent and, under
	// "agents", the agents it may hand off to. Omitted or null: the
	// backend's default agent.
	Agent json.RawMessage `json:"agent,omitempty"`
	// ID is the run id to use (letters, digits, '-', '_'; at most 64). A
	// second submission with the same id returns the same run.
	ID         string `json:"id,omitempty"`
	MaxDepth   int    `json:"agent_max_depth,omitempty"`
	MaxThreads int    `json:"agent_max_threads,omitempty"`
	// Budget bounds the run's whole tree; set amounts override the agent's.
	Budget *BudgetBody `json:"budget,omitempty"`
	// Timeout is the run's deadline as a Go duration ("30m"), at most the
	// coordinator's --max-run-timeout; default its --run-timeout.
	Timeout string `json:"timeout,omitempty"`
	// Webhooks are http or https URLs to call when the run ends, each
	// under a prefix the coordinator allows (--webhook-allow).
	Webhooks []string `json:"webhooks,omitempty"`
}

// BudgetBody is a run's budget in a submission; zero amounts are unbounded.
type BudgetBody struct {
	Tokens       int64 `json:"tokens,omitempty"`
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	// Duration is a Go duration ("10m").
	Duration string `json:"duration,omitempty"`
	Spawns   int    `json:"spawns,omitempty"`
	// USD is US dollars the tree's model calls may cost.
	USD float64 `json:"usd,omitempty"`
}

func (b *BudgetBody) budget() (limits.Budget, error) {
	out := limits.Budget{Tokens: b.Tokens, InputTokens: b.InputTokens, OutputTokens: b.OutputTokens, Spawns: b.Spawns, USD: b.USD}
	if b.Duration != "" {
		d, err := time.ParseDuration(b.Duration)
		if err != nil || d < 0 {
			return out, badRequest("budget.duration must be a duration such as \"10m\"")
		}
		out.Duration = d
	}
	if err := out.Validate(); err != nil {
		return out, badRequest("%s", strings.TrimPrefix(err.Error(), limits.ErrBadConfig.Error()+": "))
	}
	return out, nil
}

// SubmitResponse is the answer to POST /v1/runs.
type SubmitResponse struct {
	RunID string `json:"run_id"`
}

// CancelResponse is the answer to POST /v1/runs/{id}/cancel.
type CancelResponse struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
}

func (s *Server) submitRun(w http.ResponseWriter, r *http.Request) error {
	var body SubmitBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	req, err := body.Request()
	if err != nil {
		return err
	}
	// A caller that traces its request has the run's trace go on from it.
	ctx := tracing.Extract(r.Context(), map[string]string{
		tracing.HeaderTraceparent: r.Header.Get(tracing.HeaderTraceparent), tracing.HeaderTracestate: r.Header.Get(tracing.HeaderTracestate)})
	id, err := s.b.Submit(ctx, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/runs/"+id)
	writeJSON(w, http.StatusAccepted, SubmitResponse{RunID: id})
	return nil
}

// Request checks the body and turns it into a SubmitRequest: the one
// reading of a submission, for the API and for every other caller that
// takes this body (the CLI over NATS). Its errors match ErrInvalid.
func (b *SubmitBody) Request() (SubmitRequest, error) {
	req, err := b.request()
	if err != nil {
		return SubmitRequest{}, Wrap(ErrInvalid, err)
	}
	return req, nil
}

func (b *SubmitBody) request() (SubmitRequest, error) {
	if strings.TrimSpace(b.Task) == "" {
		return SubmitRequest{}, badRequest("task is required")
	}
	if b.ID != "" && !ids.Valid(b.ID) {
		return SubmitRequest{}, badRequest("id: %v", ids.Check(b.ID))
	}
	req := SubmitRequest{Task: b.Task, Model: b.Model, ID: b.ID, MaxDepth: b.MaxDepth, MaxThreads: b.MaxThreads, Webhooks: b.Webhooks}
	if b.Budget != nil {
		var err error
		if req.Budget, err = b.Budget.budget(); err != nil {
			return SubmitRequest{}, err
		}
	}
	if b.Timeout != "" {
		d, err := time.ParseDuration(b.Timeout)
		if err != nil || d <= 0 {
			return SubmitRequest{}, badRequest("timeout must be a positive duration such as \"30m\"")
		}
		req.Timeout = d
	}
	if len(b.Agent) > 0 && string(b.Agent) != "null" {
		f, err := parseAgent(b.Agent)
		if err != nil {
			return SubmitRequest{}, badRequest("%v", err)
		}
		req.Agent, req.Agents = &f.Agent, f.Catalog()
	}
	return req, nil
}

// CheckList checks the filters of a run listing, for the API and every
// other caller of Backend.ListRuns alike: status empty or a known status,
// limit at least 1 (a larger one than a page holds is cut to the page).
func CheckList(status string, limit int) error {
	if status != "" && !slices.Contains(runStatuses, status) {
		return Errorf(ErrInvalid, "status %q is not one of %s", status, strings.Join(runStatuses, ", "))
	}
	if limit < 1 {
		return Errorf(ErrInvalid, "limit %d is not a positive number (at most %d are listed)", limit, maxListLimit)
	}
	return nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	status := q.Get("status")
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return badRequest("limit %q is not a number", v)
		}
		limit = n
	}
	if err := CheckList(status, limit); err != nil {
		return err
	}
	page := q.Get("page")
	if len(page) > 64 {
		return badRequest("page must be a cursor from a Link header")
	}
	runs, next, err := s.b.ListRuns(r.Context(), status, min(limit, maxListLimit), page)
	if err != nil {
		return err
	}
	for i := range runs {
		runs[i].TraceURL = tracing.URL(s.cfg.TraceURL, runs[i].TraceID)
		runs[i] = runs[i].Shown()
	}
	if next != "" {
		nq := url.Values{"limit": {strconv.Itoa(limit)}, "page": {next}}
		if status != "" {
			nq.Set("status", status)
		}
		w.Header().Set("Link", "</v1/runs?"+nq.Encode()+`>; rel="next"`)
	}
	return answerList(w, runs, nil)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "run")
	if err != nil {
		return err
	}
	run, err := s.b.GetRun(r.Context(), id)
	if err != nil {
		return err
	}
	run.TraceURL = tracing.URL(s.cfg.TraceURL, run.TraceID)
	writeJSON(w, http.StatusOK, run.Shown())
	return nil
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "run")
	if err != nil {
		return err
	}
	return answer(w, http.StatusAccepted, CancelResponse{RunID: id, Status: "cancelling"}, s.b.CancelRun(r.Context(), id))
}

// ThreadCancelResponse is the answer to POST /v1/runs/{id}/threads/{thread}/cancel.
type ThreadCancelResponse struct {
	RunID    string `json:"run_id"`
	ThreadID string `json:"thread_id"`
	Status   string `json:"status"`
}

func (s *Server) cancelThread(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "run")
	if err != nil {
		return err
	}
	thread, err := pathID(r, "thread", "thread")
	if err != nil {
		return err
	}
	return answer(w, http.StatusAccepted, ThreadCancelResponse{RunID: id, ThreadID: thread, Status: "cancelling"},
		s.b.CancelThread(r.Context(), id, thread))
}
