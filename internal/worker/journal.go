package worker

import (
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/thread"
)

// journals opens each hosted thread's journal under its placement's token
// and proof.
type journals Worker

func (w *Worker) journal() runner.Journal {
	if w.cfg.Journal == nil {
		return nil
	}
	return (*journals)(w)
}

func (j *journals) Open(th *thread.Thread) runner.ThreadJournal {
	w := (*Worker)(j)
	w.mu.Lock()
	token, proof := "", ""
	if h, ok := w.threads[th.ID]; ok {
		token, proof = h.token, h.proof
	}
	w.mu.Unlock()
	return w.cfg.Journal(th.RunID, th.ID, token, proof)
}
