package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
)

// dearServer is an OpenAI-compatible server whose every answer reports 100
// prompt and 1,000 completion tokens, after a little latency so that the
// calls of a fan-out overlap: a conversation whose task is "fanout N" gets
// N agent calls at once, then a final answer once their results are in;
// any other task a final answer. It counts the requests.
type dearServer struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests int
	maxLive  int
	live     int
}

func startDearServer(t *testing.T) *dearServer {
	t.Helper()
	s := &dearServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *dearServer) handle(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []chatMessage `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests++
	s.live++
	s.maxLive = max(s.maxLive, s.live)
	s.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	s.live--
	s.mu.Unlock()
	msg, finish, _ := fanoutReply(req.Messages)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "dear-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 1000, "total_tokens": 1100},
	})
}

// TestUSDBudgetStopsFanOut: a dollar's budget over a 100-wide fan-out whose
// every call costs $0.11 (1,000 output tokens at $110 a million, its
// max_tokens, and 100 input tokens at a cent a million) stops within about
// a call of the budget, though the helpers call their model at once: each
// call's estimated cost is reserved before it is sent. The run fails with
// the budget named and its use, the record shows the budget's use in
// dollars, and the helpers that could not call fail with the budget's
// reason.
func TestUSDBudgetStopsFanOut(t *testing.T) {
	server := startDearServer(t)
	_, cl := startPricedStack(t, providers.FormatOpenAI, server.srv.URL+"/v1", mustPrices(t, "dear-model: {input: 0.01, output: 110}\n"), 64)

	const n = 100
	parallel := true
	root := spec.Agent{Name: "root", Model: "q/dear-model", ModelArgs: model.Args{"max_tokens": 1000},
		Tools: []string{tools.AgentToolName}, ParallelToolCalls: &parallel}
	sub := wire.RunSubmit{RunID: uuid.NewString(), Task: fmt.Sprintf("fanout %d", n), Agent: root,
		Limits: limits.Config{MaxThreads: n + 1}, Budget: limits.Budget{USD: 1.0}, Cwd: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec := runAsync(t, ctx, cl, sub, nil)()
	if rec.Status != event.Failed || !strings.HasPrefix(rec.Error, "budget exhausted (usd): $") || !strings.HasSuffix(rec.Error, "/$1.00") {
		server.mu.Lock()
		requests := server.requests
		server.mu.Unlock()
		t.Fatalf("run %s: %q, want failed with the usd budget spent (cost %v, budget %+v, %d requests)", rec.Status, rec.Error, rec.Usage.Cost(), rec.Budget, requests)
	}
	if rec.CostUSD == nil {
		t.Fatal("the run has no cost")
	}
	cost := *rec.CostUSD
	if cost < 0.90 || cost > 1.22 {
		t.Fatalf("the run cost $%.4f, want within about a call of $1.00 ($0.90 to $1.22)", cost)
	}
	use, ok := rec.Budget[limits.KindUSD]
	if !ok || use.Limit != 1_000_000 || use.Used != limits.ToMicros(cost) {
		t.Errorf("budget use %+v, want $%.4f of $1", rec.Budget, cost)
	}
	if want := fmt.Sprintf("budget exhausted (usd): %s/$1.00", limits.FormatUSD(use.Used)); rec.Error != want {
		t.Errorf("error %q, want %q", rec.Error, want)
	}
	failed, called := 0, 0
	for _, th := range rec.Threads {
		if th.Usage.Priced > 0 {
			called++
		}
		if th.Status == event.Failed {
			failed++
			if !strings.HasPrefix(th.Error, "budget exhausted (usd)") {
				t.Errorf("thread %s failed with %q", th.Name, th.Error)
			}
		}
	}
	server.mu.Lock()
	requests, maxLive := server.requests, server.maxLive
	server.mu.Unlock()
	if requests != called || requests > 10 {
		t.Errorf("%d requests, %d threads with a priced call; want the same, at most 10", requests, called)
	}
	if failed < n-10 {
		t.Errorf("%d threads failed, want most of the %d helpers", failed, n)
	}
	if maxLive < 2 {
		t.Errorf("at most %d calls at once: the fan-out did not overlap", maxLive)
	}
	t.Logf("cost $%.4f, %d requests (%d at once at most), %d threads failed: %s", cost, requests, maxLive, failed, rec.Error)
}

// TestUSDBudgetRefusesUnpricedModel: a model with no price cannot run
// under a usd budget: its first call is refused with an error that says why.
func TestUSDBudgetRefusesUnpricedModel(t *testing.T) {
	_, cl := startStack(t, 1, 4)
	sub := simSubmit(t, "hello", 0, limits.Config{})
	sub.Budget = limits.Budget{USD: 1}
	rec := runAsync(t, context.Background(), cl, sub, nil)()
	if rec.Status != event.Failed || !strings.Contains(rec.Error, "no price for model sim") || !strings.Contains(rec.Error, "usd budget") {
		t.Fatalf("run %s: %q, want failed for the unpriced model", rec.Status, rec.Error)
	}
	if rec.Usage.InputTokens+rec.Usage.OutputTokens != 0 {
		t.Errorf("usage %+v: a call was made", rec.Usage)
	}
}
