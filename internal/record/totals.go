package record

import (
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
)

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
	Refused int `json:"refused"`
	// InDoubt counts the tree's calls in doubt (Thread.InDoubt).
	InDoubt      int   `json:"in_doubt,omitempty"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens
	// read from and written to the providers' prompt caches.
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CostUSD is what the tree's model calls cost in US dollars, null when
	// one of them was of a model with no price.
	CostUSD *float64 `json:"cost_usd"`
}

// Sum computes r's totals. The tokens and the cost are the run's own count
// when it has one (its final record), else the sum of its threads'.
func (r *Run) Sum() Totals {
	var t Totals
	var sum model.Usage
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
		sum = sum.Add(th.Usage)
		t.InDoubt += th.InDoubt
	}
	if u := r.Usage; u.InputTokens+u.OutputTokens > 0 {
		sum = u
	}
	t.InputTokens, t.OutputTokens = sum.InputTokens, sum.OutputTokens
	t.CacheReadTokens, t.CacheWriteTokens = sum.CacheReadTokens, sum.CacheWriteTokens
	t.CostUSD = sum.Cost()
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
