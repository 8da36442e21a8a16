package api

import (
	"net/http"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
)

// ThreadSummary is one thread of a run, as GET /v1/runs/{id}/threads lists
// it (read from the run's journal).
type ThreadSummary struct {
	ID       string `json:"id"`
	ParentID string `json:"parent_id,omitempty"`
	Name     string `json:"name"`
	// Path is the names from the root down to the thread, such as
	// formica/research/outline.
	Path   string       `json:"path"`
	Depth  int          `json:"depth"`
	Status event.Status `json:"status"`
	Error  string       `json:"error,omitempty"`
	// Worker is where the thread was placed last; Attempts counts its
	// placements.
	Worker   string `json:"worker,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	// Usage is the thread's own model calls.
	Usage      model.Usage `json:"usage"`
	StartedAt  time.Time   `json:"started_at,omitzero"`
	FinishedAt time.Time   `json:"finished_at,omitzero"`
}

// ResumeResponse is the answer to POST /v1/runs/{id}/resume.
type ResumeResponse struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
}

func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "run")
	if err != nil {
		return err
	}
	if err := s.b.ResumeRun(r.Context(), id); err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/runs/"+id)
	writeJSON(w, http.StatusAccepted, ResumeResponse{RunID: id, Status: "queued"})
	return nil
}

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "run")
	if err != nil {
		return err
	}
	threads, err := s.b.Threads(r.Context(), id)
	return answerList(w, threads, err)
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "run")
	if err != nil {
		return err
	}
	thread, err := pathID(r, "thread", "thread")
	if err != nil {
		return err
	}
	t, err := s.b.Transcript(r.Context(), id, thread)
	return answer(w, http.StatusOK, t, err)
}

// Transcript is the body of GET /v1/runs/{id}/threads/{thread}.
type Transcript = journal.Transcript
