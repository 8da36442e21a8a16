package worker

import (
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/thread"
)

// journals opens each hosted thread's journal under its placement's token.
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
	token := ""
	if h, ok := w.threads[th.ID]; ok {
		token = h.token
	}
	w.mu.Unlock()
	return w.cfg.Journal(th.RunID, th.ID, token)
}
