// Package record builds the record of a run — its status, output, every thread
// of its tree, refusals and token usage — from the run's events. The same
// record is what `formica run --json` prints and, in a cluster, what the run
// store keeps.
package record

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
)

// Run is the record of one run.
type Run struct {
	RunID    string       `json:"run_id"`
	Status   event.Status `json:"status"`
	Output   string       `json:"output"`
	Error    string       `json:"error"`
	Threads  []Thread     `json:"threads"`
	Refusals Refusals     `json:"refusals"`
	Usage    model.Usage  `json:"usage"`
	// CostUSD is what the run's model calls cost in US dollars (Usage's
	// Cost), once it has ended; null while it runs, and when a model of it
	// has no price.
	CostUSD *float64 `json:"cost_usd"`
	// Budget is the run budget's use: for each bounded kind (tokens,
	// input_tokens, output_tokens, duration in milliseconds, spawns) the
	// amount used and the limit.
	Budget limits.Use `json:"budget,omitempty"`

	// What was submitted; kept by the run store, empty in a one-shot run's record.
	Task   string                `json:"task,omitempty"`
	Spec   *spec.Agent           `json:"spec,omitempty"`
	Agents map[string]spec.Agent `json:"agents,omitempty"`
	Model  string                `json:"model,omitempty"`
	// MaxDepth and MaxThreads are the agent_max_depth and
	// agent_max_threads the run was submitted with; 0 means the defaults.
	MaxDepth   int `json:"agent_max_depth,omitempty"`
	MaxThreads int `json:"agent_max_threads,omitempty"`
	// Cwd is the harness directory it was submitted with, kept so the run
	// can be resumed.
	Cwd string `json:"cwd,omitempty"`
	// SubmittedBudget and Timeout are the budget (the spec's with the
	// submission's amounts over it) and the deadline the run was submitted
	// with, kept so a resume runs under the same bounds.
	SubmittedBudget limits.Budget `json:"submitted_budget,omitzero"`
	Timeout         time.Duration `json:"timeout_ns,omitempty"`
	// Webhooks are the URLs the submission asked to be called when the
	// run ends, kept so a resume calls them too.
	Webhooks []string `json:"webhooks,omitempty"`
	// Attempts counts how often a coordinator started the run (a dead
	// coordinator's runs are delivered again, a resumed run once more).
	Attempts int `json:"attempts,omitempty"`
	// Resumes counts `formica resume`s of the run.
	Resumes int `json:"resumes,omitempty"`
	// CancelRequested is the reason of a cancel sent while the run was
	// running: it is honoured even if the run's coordinator died meanwhile,
	// by the next one that picks the run up.
	CancelRequested string    `json:"cancel_requested,omitempty"`
	Coordinator     string    `json:"coordinator,omitempty"`
	CreatedAt       time.Time `json:"created_at,omitzero"`
	StartedAt       time.Time `json:"started_at,omitzero"`
	FinishedAt      time.Time `json:"finished_at,omitzero"`
	// TraceID is the run's OpenTelemetry trace, when it was traced.
	TraceID string `json:"trace_id,omitempty"`
	// TraceURL links to the trace: filled in where a --trace-url template
	// is known (the API, the CLI) as the record is shown, never stored.
	TraceURL string `json:"trace_url,omitempty"`
	// Totals sums up the tree (Sum): filled in as the record is shown
	// (Shown), never stored.
	Totals *Totals `json:"totals,omitempty"`
}

// Queued is the status of a submitted run no coordinator has started yet.
const Queued event.Status = "queued"

// Thread is one thread of a run's tree.
type Thread struct {
	ID       string       `json:"id"`
	ParentID string       `json:"parent_id"`
	Name     string       `json:"name"`
	Depth    int          `json:"depth"`
	Status   event.Status `json:"status"`
	Worker   string       `json:"worker,omitempty"`
	// Error says why the thread failed or was cancelled.
	Error string `json:"error,omitempty"`
	// Waiting says why a thread with status waiting has not started
	// ("waiting for a worker").
	Waiting string `json:"waiting,omitempty"`
	// Usage is the thread's own model calls, not its helpers'.
	Usage model.Usage `json:"usage"`
	// CostUSD is what those calls cost in US dollars, null when one of
	// them was of a model with no price.
	CostUSD *float64 `json:"cost_usd"`
	// Reused says the thread had finished in an earlier execution of the
	// run (a delivery after its coordinator died, or a resume): its output
	// came from its journal and it did not run again.
	Reused bool `json:"reused,omitempty"`
	// InDoubt counts the thread's calls of at-most-once tools that a
	// failure cut before their result and that were not run again: each
	// may or may not have taken effect (its tool.result says in_doubt).
	InDoubt    int       `json:"in_doubt,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Refusals counts spawns turned away, by limit.
type Refusals struct {
	Depth   int `json:"depth"`
	Threads int `json:"threads"`
	Budget  int `json:"budget"`
}

// Recorder is an event.Sink that keeps a run's record up to date. It is safe
// for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	run     Run
	threads map[string]*Thread
	order   []string // thread ids in order of first sight
	changed func()
	// Call order, so siblings show in the order their parent asked for
	// them however their spawns raced: the position of each agent tool
	// call ("parent/call id"), and the call that spawned each helper.
	calls   map[string]int
	spawnOf map[string]string
	// inDoubt is each thread's calls found in doubt in earlier executions
	// of the run (InDoubtBefore).
	inDoubt map[string]int
}

// NewRecorder returns a recorder. changed, if not nil, is called (outside the
// lock) after each event that alters the record.
func NewRecorder(changed func()) *Recorder {
	return &Recorder{threads: map[string]*Thread{}, changed: changed, calls: map[string]int{}, spawnOf: map[string]string{},
		inDoubt: map[string]int{}}
}

// Emit folds one event into the record.
func (r *Recorder) Emit(e event.Event) {
	r.mu.Lock()
	altered := r.apply(&e)
	r.mu.Unlock()
	if altered && r.changed != nil {
		r.changed()
	}
}

func (r *Recorder) apply(e *event.Event) bool {
	if r.run.RunID == "" {
		r.run.RunID = e.RunID
	}
	switch e.Type {
	case event.RunStarted:
		r.run.Status = event.Running
	case event.RunFinished:
		r.run.Status, r.run.Error, r.run.Usage = e.Status, e.Reason, e.Usage
	case event.ThreadRefused:
		switch e.Reason {
		case "depth":
			r.run.Refusals.Depth++
		case "budget":
			r.run.Refusals.Budget++
		default:
			r.run.Refusals.Threads++
		}
	case event.ToolCall:
		if e.Tool != journal.AgentTool || e.CallID == "" {
			return false
		}
		if _, seen := r.calls[e.ThreadID+"/"+e.CallID]; !seen {
			r.calls[e.ThreadID+"/"+e.CallID] = len(r.calls)
		}
	case event.ToolResult:
		if !e.InDoubt {
			return false
		}
		r.thread(e).InDoubt++
	case event.ThreadSpawned:
		r.thread(e)
		if e.CallID != "" {
			r.spawnOf[e.ThreadID] = e.ParentID + "/" + e.CallID
		}
	case event.ThreadWaiting:
		t := r.thread(e)
		if !t.Status.Final() {
			t.Status, t.Waiting = event.Waiting, e.Reason
		}
	case event.ModelWaiting:
		t := r.thread(e)
		if !t.Status.Final() {
			t.Status, t.Waiting = event.Running, ""
			if e.Status == event.Waiting {
				t.Status, t.Waiting = event.Waiting, e.Reason
			}
		}
	case event.ThreadStarted:
		t := r.thread(e)
		t.Status, t.Waiting = event.Running, ""
		t.StartedAt = e.Time
		if e.Worker != "" {
			t.Worker = e.Worker
		}
	case event.ThreadFinished:
		t := r.thread(e)
		t.Status, t.Error, t.FinishedAt, t.Waiting = e.Status, e.Reason, e.Time, ""
	case event.ModelCall:
		t := r.thread(e)
		t.Usage = t.Usage.Add(e.Usage)
		if t.Status == event.Waiting && strings.HasPrefix(t.Waiting, event.WaitingForQuota) {
			t.Status, t.Waiting = event.Running, "" // the call ended without its share
		}
	default:
		return false
	}
	return true
}

func (r *Recorder) thread(e *event.Event) *Thread {
	t, ok := r.threads[e.ThreadID]
	if !ok {
		t = &Thread{ID: e.ThreadID, ParentID: e.ParentID, Name: e.Name, Depth: e.Depth, Status: "pending",
			InDoubt: r.inDoubt[e.ThreadID]}
		r.threads[e.ThreadID] = t
		r.order = append(r.order, e.ThreadID)
	}
	return t
}

// ThreadUsage sets a thread's own token usage.
func (r *Recorder) ThreadUsage(id string, u model.Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.threads[id]; ok {
		t.Usage = u
	}
}

// InDoubtBefore counts n calls of thread id found in doubt in earlier
// executions of the run (its journal says so): this execution reuses
// their answers without a tool.result.
func (r *Recorder) InDoubtBefore(id string, n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inDoubt[id] = n
	if t, ok := r.threads[id]; ok {
		t.InDoubt += n
	}
}

// Reused marks thread id as reused from its journal.
func (r *Recorder) Reused(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.threads[id]; ok {
		t.Reused = true
	}
}

// SetResult records the run's final output (events carry no outputs of runs).
func (r *Recorder) SetResult(status event.Status, output, errText string, usage model.Usage) {
	r.mu.Lock()
	r.run.Status, r.run.Output, r.run.Error, r.run.Usage = status, output, errText, usage
	r.mu.Unlock()
}

// Snapshot returns a copy of the record, threads root first, then in tree
// order: each thread followed by its helpers, in the order the parent
// called for them when the record saw those calls, else as they were seen.
func (r *Recorder) Snapshot() Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.run
	out.CostUSD = nil
	if out.Status.Final() {
		out.CostUSD = out.Usage.Cost()
	}
	order := make([]Thread, 0, len(r.order))
	for _, id := range r.order {
		t := *r.threads[id]
		t.CostUSD = t.Usage.Cost()
		order = append(order, t)
	}
	pos := func(t Thread) (int, bool) {
		n, ok := r.calls[r.spawnOf[t.ID]]
		return n, ok
	}
	// Helpers whose call was seen come first, in call order; the rest
	// follow as they were seen.
	out.Threads = treeOrder(order, func(a, b Thread) bool {
		pa, oka := pos(a)
		pb, okb := pos(b)
		return oka && (!okb || pa < pb)
	})
	return out
}

// TreeOrder returns threads in tree order — roots (shallowest first), each
// followed by its helpers — keeping the given order among siblings.
func TreeOrder(threads []Thread) []Thread { return treeOrder(threads, nil) }

// treeOrder is TreeOrder with siblings sorted by less (stable), if not nil.
func treeOrder(threads []Thread, less func(a, b Thread) bool) []Thread {
	byID := make(map[string]int, len(threads))
	for i, t := range threads {
		byID[t.ID] = i
	}
	children := map[string][]int{}
	var roots []int
	for i, t := range threads {
		if _, ok := byID[t.ParentID]; t.ParentID == "" || !ok {
			roots = append(roots, i)
		} else {
			children[t.ParentID] = append(children[t.ParentID], i)
		}
	}
	sort.SliceStable(roots, func(i, j int) bool { return threads[roots[i]].Depth < threads[roots[j]].Depth })
	if less != nil {
		for _, kids := range children {
			sort.SliceStable(kids, func(i, j int) bool { return less(threads[kids[i]], threads[kids[j]]) })
		}
	}
	out := make([]Thread, 0, len(threads))
	var walk func(i int)
	walk = func(i int) {
		out = append(out, threads[i])
		for _, c := range children[threads[i].ID] {
			walk(c)
		}
	}
	for _, i := range roots {
		walk(i)
	}
	return out
}
