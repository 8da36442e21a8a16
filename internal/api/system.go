package api

import (
	"context"
	"net/http"
	"time"
)

// readyTimeout bounds the backend's readiness check: a probe wants a quick
// answer, and a backend that cannot give one is not ready.
const readyTimeout = 5 * time.Second

func (s *Server) workers(w http.ResponseWriter, r *http.Request) error {
	list, err := s.b.Workers(r.Context())
	return answerList(w, list, err)
}

func (s *Server) assets(w http.ResponseWriter, r *http.Request) error {
	a, err := s.b.Assets(r.Context())
	return answer(w, http.StatusOK, a, err)
}

// Status is the body of /healthz and of a ready /readyz.
type Status struct {
	Status string `json:"status"`
	// Workers is, on /readyz, how many live workers the coordinator knows
	// (when the backend is a WorkerCounter).
	Workers *int `json:"workers,omitempty"`
}

// WorkerCounter is a Backend that knows at once how many live workers it
// has; /readyz then reports the count. known is false when it cannot say.
type WorkerCounter interface {
	LiveWorkers() (n int, known bool)
}

// healthz says the process is alive; it asks nothing of the backend.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, Status{Status: "ok"})
	return nil
}

// readyz says whether the backend can serve: 200 {"status":"ready"}, or 503
// unavailable with the reason.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.b.Ready(ctx); err != nil {
		writeErrorBody(w, http.StatusServiceUnavailable, codeUnavailable, err.Error())
		return nil
	}
	st := Status{Status: "ready"}
	if wc, ok := s.b.(WorkerCounter); ok {
		if n, known := wc.LiveWorkers(); known {
			st.Workers = &n
		}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
