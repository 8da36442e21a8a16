package record

import "github.com/formica-run/formica/internal/event"

// Totals sums up a run's tree: its threads by state, the spawns refused
// by each limit, and the tokens. It is the one count the terminal,
// `formica get`, the HTTP API and the dashboard show.
type Totals struct {
	Done      int `json:"done"`
	Running   int `json:"running"`
	Waiting   int `json:"waiting"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	// Refused counts the spawns turned away by the depth, thread and
	// budget limits together (Refusals has each).
	Refused      int   `json:"refused"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Sum computes r's totals. The tokens are the run's own count when it has
// one (its final record), else the sum of its threads'.
func (r *Run) Sum() Totals {
	var t Totals
	for _, th := range r.Threads {
		switch th.Status {
		case event.Succeeded:
			t.Done++
		case event.Failed:
			t.Failed++
		case event.Cancelled:
			t.Cancelled++
		case event.Waiting:
			t.Waiting++
		default:
			t.Running++
		}
		t.InputTokens += th.Usage.InputTokens
		t.OutputTokens += th.Usage.OutputTokens
	}
	if u := r.Usage; u.InputTokens+u.OutputTokens > 0 {
		t.InputTokens, t.OutputTokens = u.InputTokens, u.OutputTokens
	}
	t.Refused = r.Refusals.Depth + r.Refusals.Threads + r.Refusals.Budget
	return t
}

// Shown is r as it is shown (the API, `formica get`, `formica run
// --json`): with its totals.
func (r Run) Shown() Run {
	t := r.Sum()
	r.Totals = &t
	return r
}
