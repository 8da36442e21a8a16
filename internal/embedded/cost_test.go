package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/pricing"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
)

// cachingServer is an OpenAI-compatible server that records every request
// and answers as a fan-out needs: a conversation whose task starts with
// "fanout N" gets N agent calls at once, then a final answer once their
// results are in; any other task a final answer. Each answer's usage grows
// with its request and reports part of its prompt as cached, as a provider
// with a prompt cache does.
type cachingServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]int // prompt_cache_key -> requests
}

func startCachingServer(t *testing.T) *cachingServer {
	t.Helper()
	s := &cachingServer{keys: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *cachingServer) handle(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages       []chatMessage `json:"messages"`
		PromptCacheKey string        `json:"prompt_cache_key"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.keys[req.PromptCacheKey]++
	s.mu.Unlock()
	msg, finish, results := fanoutReply(req.Messages)
	prompt := int64(1000 + 37*len(req.Messages) + 11*results)
	cached := prompt / 2
	out := int64(20 + 3*len(req.Messages))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "priced-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
			"prompt_tokens_details": map[string]any{"cached_tokens": cached}},
	})
}

// TestFanOutCost: a 20-wide fan-out on a priced model has a cost on the
// run and on every thread equal to its usage at the price file's prices,
// the cached part of the input at the cached price; every call carries its
// thread's prompt_cache_key, and the model.call events carry their cost.
func TestFanOutCost(t *testing.T) {
	server := startCachingServer(t)
	// Keyed by the full ref: this endpoint's model only.
	prices := mustPrices(t, "q/priced-model: {input: 1.25, cached_input: 0.125, output: 10}\n")
	_, cl := startPricedStack(t, providers.FormatOpenAI, server.srv.URL+"/v1", prices, 16)
	price, ok := prices.Lookup("q/priced-model")
	if !ok {
		t.Fatal("no price for q/priced-model")
	}

	const n = 20
	parallel := true
	root := spec.Agent{Name: "root", Model: "q/priced-model", Tools: []string{tools.AgentToolName}, ParallelToolCalls: &parallel}
	sub := wire.RunSubmit{RunID: uuid.NewString(), Task: fmt.Sprintf("fanout %d", n), Agent: root,
		Limits: limits.Config{MaxThreads: n + 1}, Cwd: t.TempDir()}
	var evMu sync.Mutex
	var calls []event.Event
	var finished []event.Event
	sink := event.SinkFunc(func(e event.Event) {
		evMu.Lock()
		defer evMu.Unlock()
		switch e.Type {
		case event.ModelCall:
			calls = append(calls, e)
		case event.ThreadFinished, event.RunFinished:
			finished = append(finished, e)
		}
	})
	rec := runAsync(t, context.Background(), cl, sub, sink)()
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s", rec.Status, rec.Error)
	}
	if len(rec.Threads) != n+1 {
		t.Fatalf("%d threads, want %d", len(rec.Threads), n+1)
	}

	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	var sum float64
	for _, th := range rec.Threads {
		if th.CostUSD == nil {
			t.Errorf("thread %s (%s): no cost", th.Name, th.ID)
			continue
		}
		if th.Usage.CacheReadTokens == 0 || th.Usage.CacheReadTokens >= th.Usage.InputTokens {
			t.Errorf("thread %s: usage %+v, want a cached part of the input", th.Name, th.Usage)
		}
		if want := price.Cost(th.Usage); !near(*th.CostUSD, want) || want == 0 {
			t.Errorf("thread %s: cost %v, want %v (usage %+v)", th.Name, *th.CostUSD, want, th.Usage)
		}
		sum += *th.CostUSD
	}
	if rec.CostUSD == nil {
		t.Fatal("the run has no cost")
	}
	if want := price.Cost(rec.Usage); !near(*rec.CostUSD, want) || !near(*rec.CostUSD, sum) {
		t.Errorf("run cost %v, want usage × prices %v = the threads' sum %v (usage %+v)", *rec.CostUSD, want, sum, rec.Usage)
	}
	if shown := rec.Shown(); shown.Totals.CostUSD == nil || !near(*shown.Totals.CostUSD, *rec.CostUSD) {
		t.Errorf("totals cost %v, want the run's %v", shown.Totals.CostUSD, *rec.CostUSD)
	}

	// Every call was keyed by its thread.
	ids := map[string]bool{}
	for _, th := range rec.Threads {
		ids[th.ID] = true
	}
	server.mu.Lock()
	for key, count := range server.keys {
		if !ids[key] {
			t.Errorf("prompt_cache_key %q (%d requests) is no thread's id", key, count)
		}
	}
	if len(server.keys) != n+1 {
		t.Errorf("%d prompt cache keys, want one per thread (%d)", len(server.keys), n+1)
	}
	server.mu.Unlock()

	evMu.Lock()
	defer evMu.Unlock()
	if len(calls) != n+2 {
		t.Errorf("%d model.call events, want %d", len(calls), n+2)
	}
	for _, e := range calls {
		if e.Usage.CostUSD <= 0 || e.Usage.Unpriced != 0 || !near(e.Usage.CostUSD, price.Cost(e.Usage)) || e.Usage.CacheReadTokens == 0 {
			t.Errorf("model.call event usage %+v, want its cost at the prices", e.Usage)
		}
	}
	var runEnd *event.Event
	for i, e := range finished {
		if e.Usage.Cost() == nil {
			t.Errorf("%s event of %s has no cost: %+v", e.Type, e.ThreadID, e.Usage)
		}
		if e.Type == event.RunFinished {
			runEnd = &finished[i]
		}
	}
	if runEnd == nil || !near(runEnd.Usage.CostUSD, *rec.CostUSD) {
		t.Errorf("run.finished event %+v, want the run's cost %v", runEnd, *rec.CostUSD)
	}
}

// A model with no price leaves the cost null on its threads and the run.
func TestUnpricedCostIsNull(t *testing.T) {
	_, cl := startStack(t, 1, 4)
	rec := runAsync(t, context.Background(), cl, simSubmit(t, "Plan:\n- a\n- b", 0, limits.Config{}), nil)()
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s", rec.Status, rec.Error)
	}
	if rec.CostUSD != nil {
		t.Errorf("run cost %v on the sim model, want null", *rec.CostUSD)
	}
	for _, th := range rec.Threads {
		if th.CostUSD != nil || th.Usage.Unpriced == 0 {
			t.Errorf("thread %s: cost %v, usage %+v; want null and unpriced calls", th.Name, th.CostUSD, th.Usage)
		}
	}
	var u model.Usage
	if u.Cost() == nil {
		t.Error("no calls cost nothing, not null")
	}
}

// startPricedStack starts a stack of two workers whose endpoint "q" is the
// server at baseURL speaking format, at prices, and a client of it.
func startPricedStack(t *testing.T, format, baseURL string, prices *pricing.Table, slots int) (*Stack, *oneshot.Client) {
	t.Helper()
	eps, err := providers.Parse([]byte(fmt.Sprintf("endpoints:\n  q:\n    format: %s\n    base_url: %s\n", format, baseURL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return startStackOf(t, Config{Workers: 2, Slots: slots, Models: &providers.Opener{Endpoints: eps}, Prices: prices})
}

// mustPrices reads a prices file's text.
func mustPrices(t *testing.T, pricesYAML string) *pricing.Table {
	t.Helper()
	pricesFile := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(pricesFile, []byte(pricesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	prices, err := pricing.Load(pricesFile)
	if err != nil {
		t.Fatal(err)
	}
	return prices
}

// chatMessage is a Chat Completions request message, as the test servers
// read it.
type chatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// fanoutReply is the test servers' answer to a conversation: "fanout N"
// as the task, before any tool result, calls the agent tool N times
// (helpers h0... with tasks "leaf i"); anything else is answered "done:
// <task>". results is the tool results the conversation holds.
func fanoutReply(messages []chatMessage) (msg map[string]any, finish string, results int) {
	task := ""
	for _, m := range messages {
		switch m.Role {
		case "user":
			if s, ok := m.Content.(string); ok && task == "" {
				task = s
			}
		case "tool":
			results++
		}
	}
	var n int
	if _, err := fmt.Sscanf(task, "fanout %d", &n); err != nil || results > 0 {
		return map[string]any{"role": "assistant", "content": "done: " + task}, "stop", results
	}
	var calls []any
	for i := range n {
		args, _ := json.Marshal(map[string]string{"name": fmt.Sprintf("h%d", i), "task": fmt.Sprintf("leaf %d", i)})
		calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
			"function": map[string]any{"name": tools.AgentToolName, "arguments": string(args)}})
	}
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}, "tool_calls", results
}
