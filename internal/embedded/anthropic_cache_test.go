package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
)

// anthropicUsage is the usage an Anthropic answer reports: input_tokens
// leaves out the tokens read from and written to the prompt cache.
type anthropicUsage struct {
	Input, CacheWrite, CacheRead, Output int64
}

// anthropicCall is one request the Anthropic server answered: the task of
// its conversation (its first user text), where its cache_control
// breakpoints were and where the documented rule puts them, every
// cache_control value, and the usage it reported.
type anthropicCall struct {
	task        string
	breakpoints []string
	want        []string
	controls    []string
	messages    int
	tools       int
	system      int
	usage       anthropicUsage
}

// anthropicServer speaks the Anthropic Messages API (POST /v1/messages,
// streamed as server-sent events) and records every request. A
// conversation whose task is "fanout N" gets N agent tool_use blocks, then
// a final answer once their results are in; any other task a final answer.
// The usage reports a cache as the API does: a thread's first call writes
// its prompt to the cache, a later call reads what the first wrote back
// and writes what the conversation added.
type anthropicServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []anthropicCall
}

func startAnthropicServer(t *testing.T) *anthropicServer {
	t.Helper()
	s := &anthropicServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

// wireBlock is a content block, tool or system block as the request sends
// it, with what the server looks at.
type wireBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control"`
}

func (s *anthropicServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Model    string      `json:"model"`
		Stream   bool        `json:"stream"`
		System   []wireBlock `json:"system"`
		Tools    []wireBlock `json:"tools"`
		Messages []struct {
			Role    string      `json:"role"`
			Content []wireBlock `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad JSON"}}`, http.StatusBadRequest)
		return
	}
	call := anthropicCall{messages: len(req.Messages), tools: len(req.Tools), system: len(req.System)}

	// Where the breakpoints are.
	note := func(at string, b wireBlock) {
		if b.CacheControl != nil {
			call.breakpoints = append(call.breakpoints, at)
			call.controls = append(call.controls, string(b.CacheControl))
		}
	}
	for i, b := range req.Tools {
		note(fmt.Sprintf("tools[%d]", i), b)
	}
	for i, b := range req.System {
		note(fmt.Sprintf("system[%d]", i), b)
	}
	for i, m := range req.Messages {
		for j, b := range m.Content {
			note(fmt.Sprintf("messages[%d].content[%d]", i, j), b)
		}
	}
	// Where docs/models.md puts them: on the last tool, the last system
	// block, the last block of the user turn before the last assistant
	// turn, and the last block of the conversation (never on thinking).
	lastBlock := func(i int) {
		c := req.Messages[i].Content
		for j := len(c) - 1; j >= 0; j-- {
			if c[j].Type != "thinking" && c[j].Type != "redacted_thinking" {
				call.want = append(call.want, fmt.Sprintf("messages[%d].content[%d]", i, j))
				return
			}
		}
	}
	if n := len(req.Tools); n > 0 {
		call.want = append(call.want, fmt.Sprintf("tools[%d]", n-1))
	}
	if n := len(req.System); n > 0 {
		call.want = append(call.want, fmt.Sprintf("system[%d]", n-1))
	}
	last := len(req.Messages) - 1
	for i := last - 1; i > 0; i-- {
		if req.Messages[i].Role == "assistant" {
			if req.Messages[i-1].Role == "user" {
				lastBlock(i - 1)
			}
			break
		}
	}
	if last >= 0 {
		lastBlock(last)
	}

	// The conversation: its task, the tool results in.
	results, assistant := 0, false
	for _, m := range req.Messages {
		for _, b := range m.Content {
			switch {
			case m.Role == "user" && b.Type == "text" && call.task == "":
				call.task = b.Text
			case m.Role == "user" && b.Type == "tool_result":
				results++
			}
		}
		assistant = assistant || m.Role == "assistant"
	}

	// The cache: a thread's first call writes its prompt, a later one
	// reads that back and writes what was added since.
	prefix := int64(1200 + 10*len(call.task))
	u := anthropicUsage{Input: 7, CacheWrite: prefix, Output: int64(20 + 5*len(req.Messages))}
	if assistant {
		u = anthropicUsage{Input: 3, CacheRead: prefix, CacheWrite: int64(40 + 150*results), Output: int64(11 + 5*len(req.Messages))}
	}
	call.usage = u
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()

	// The answer's content blocks, then the stream.
	type block struct {
		start  map[string]any
		deltas []map[string]any
	}
	var blocks []block
	stop := "end_turn"
	var n int
	if _, err := fmt.Sscanf(call.task, "fanout %d", &n); err == nil && results == 0 {
		stop = "tool_use"
		blocks = append(blocks, block{map[string]any{"type": "text", "text": ""},
			[]map[string]any{{"type": "text_delta", "text": "Spawning helpers."}}})
		for i := range n {
			args, _ := json.Marshal(map[string]string{"name": fmt.Sprintf("h%d", i), "task": fmt.Sprintf("leaf %d", i)})
			half := len(args) / 2
			blocks = append(blocks, block{
				map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", i), "name": tools.AgentToolName, "input": map[string]any{}},
				[]map[string]any{
					{"type": "input_json_delta", "partial_json": string(args[:half])},
					{"type": "input_json_delta", "partial_json": string(args[half:])},
				}})
		}
	} else {
		blocks = append(blocks, block{map[string]any{"type": "text", "text": ""},
			[]map[string]any{{"type": "text_delta", "text": "done: "}, {"type": "text_delta", "text": call.task}}})
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(name string, data map[string]any) {
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, raw)
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_" + uuid.NewString(), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Input, "cache_creation_input_tokens": u.CacheWrite,
			"cache_read_input_tokens": u.CacheRead, "output_tokens": 1},
	}})
	for i, b := range blocks {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b.start})
		for _, d := range b.deltas {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// recorded returns the requests answered so far.
func (s *anthropicServer) recorded() []anthropicCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// TestAnthropicPromptCacheEndToEnd runs a fan-out of three helpers on an
// Anthropic endpoint (a local server speaking the Messages API) under a
// token budget and a prices file:
//
//   - every request carries its cache_control breakpoints where
//     docs/models.md says: at most four, on the last tool, the last system
//     block, the end of the previous request's conversation and the end of
//     this one, each {"type":"ephemeral"};
//   - the record's usage, of every thread and of the run, has the cache
//     reads and writes the server reported, summed, inside input_tokens;
//   - the token budgets count the cached input: tokens used is every input
//     token, cached or not, plus the output;
//   - the cost is the usage at the file's prices, cache reads at
//     cached_input and writes at cache_write.
func TestAnthropicPromptCacheEndToEnd(t *testing.T) {
	server := startAnthropicServer(t)
	const (
		input, cachedInput, cacheWrite, output = 3.0, 0.30, 3.75, 15.0
	)
	prices := mustPrices(t, fmt.Sprintf("q/claude-test: {input: %v, cached_input: %v, cache_write: %v, output: %v}\n",
		input, cachedInput, cacheWrite, output))
	_, cl := startPricedStack(t, providers.FormatAnthropic, server.srv.URL, prices, 4)

	const n = 3
	parallel := true
	root := spec.Agent{Name: "root", Model: "q/claude-test", Instructions: "You split work among helpers.",
		Tools: []string{tools.AgentToolName}, ParallelToolCalls: &parallel}
	const budget = 1_000_000
	sub := wire.RunSubmit{RunID: uuid.NewString(), Task: fmt.Sprintf("fanout %d", n), Agent: root,
		Limits: limits.Config{MaxThreads: n + 1}, Cwd: t.TempDir(),
		Budget: limits.Budget{Tokens: budget, InputTokens: budget, OutputTokens: budget}}
	var evMu sync.Mutex
	var events []model.Usage
	sink := event.SinkFunc(func(e event.Event) {
		if e.Type == event.ModelCall {
			evMu.Lock()
			events = append(events, e.Usage)
			evMu.Unlock()
		}
	})
	rec := runAsync(t, context.Background(), cl, sub, sink)()
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s", rec.Status, rec.Error)
	}
	if len(rec.Threads) != n+1 {
		t.Fatalf("%d threads, want %d: %+v", len(rec.Threads), n+1, rec.Threads)
	}

	// 1. The breakpoints of every request.
	calls := server.recorded()
	if len(calls) != n+2 {
		t.Fatalf("%d requests, want %d (two of the root, one per helper)", len(calls), n+2)
	}
	four := 0
	for i, c := range calls {
		if c.tools == 0 || c.system == 0 {
			t.Errorf("request %d (%q): %d tools, %d system blocks; want both", i, c.task, c.tools, c.system)
		}
		got, want := slices.Sorted(slices.Values(c.breakpoints)), slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) || len(got) > 4 {
			t.Errorf("request %d (%q, %d messages): breakpoints at %v, want %v (at most 4)", i, c.task, c.messages, c.breakpoints, c.want)
		}
		for _, cc := range c.controls {
			if cc != `{"type":"ephemeral"}` {
				t.Errorf("request %d: cache_control %s, want {\"type\":\"ephemeral\"}", i, cc)
			}
		}
		if len(c.breakpoints) == 4 {
			four++
		}
	}
	if four != 1 {
		t.Errorf("%d requests with four breakpoints, want one (the root's second)", four)
	}

	// 2. The usage of every thread and of the run: what the server
	// reported, summed, the cached tokens inside input_tokens.
	byTask := map[string]model.Usage{}
	reads := 0
	var total model.Usage
	for _, c := range calls {
		u := model.Usage{
			InputTokens:      c.usage.Input + c.usage.CacheRead + c.usage.CacheWrite,
			OutputTokens:     c.usage.Output,
			CacheReadTokens:  c.usage.CacheRead,
			CacheWriteTokens: c.usage.CacheWrite,
		}
		byTask[c.task] = byTask[c.task].Add(u)
		total = total.Add(u)
		if c.usage.CacheRead > 0 {
			reads++
		}
	}
	if reads != 1 {
		t.Errorf("%d requests read from the cache, want one (the root's second)", reads)
	}
	tokens := func(u model.Usage) model.Usage {
		return model.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens}
	}
	// The record as the API shows it, by its JSON names.
	type wireUsage struct {
		InputTokens      int64 `json:"input_tokens"`
		OutputTokens     int64 `json:"output_tokens"`
		CacheReadTokens  int64 `json:"cache_read_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	}
	var shown struct {
		Usage   wireUsage `json:"usage"`
		Threads []struct {
			Name  string    `json:"name"`
			Usage wireUsage `json:"usage"`
		} `json:"threads"`
		CostUSD *float64 `json:"cost_usd"`
		Budget  map[string]struct {
			Used  int64 `json:"used"`
			Limit int64 `json:"limit"`
		} `json:"budget"`
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &shown); err != nil {
		t.Fatal(err)
	}
	asWire := func(u model.Usage) wireUsage {
		return wireUsage{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens}
	}
	taskOf := map[string]string{"root": sub.Task}
	for i := range n {
		taskOf[fmt.Sprintf("h%d", i)] = fmt.Sprintf("leaf %d", i)
	}
	for i, th := range rec.Threads {
		task, ok := taskOf[th.Name]
		if !ok {
			t.Errorf("thread %q (%s) is not one of the run's", th.Name, th.ID)
			continue
		}
		want := byTask[task]
		if got := tokens(th.Usage); got != want || want.CacheWriteTokens == 0 {
			t.Errorf("thread %s: usage %+v, want the server's %+v", th.Name, got, want)
		}
		if th.Usage.InputTokens < th.Usage.CacheReadTokens+th.Usage.CacheWriteTokens {
			t.Errorf("thread %s: input_tokens %d do not include the cached %d + %d", th.Name,
				th.Usage.InputTokens, th.Usage.CacheReadTokens, th.Usage.CacheWriteTokens)
		}
		if got := shown.Threads[i].Usage; shown.Threads[i].Name != th.Name || got != asWire(want) {
			t.Errorf("thread %s in JSON: %s %+v, want %+v", th.Name, shown.Threads[i].Name, got, asWire(want))
		}
	}
	if root := byTask[sub.Task]; root.CacheReadTokens == 0 {
		t.Errorf("the root's usage %+v reads nothing from the cache", root)
	}
	if got := tokens(rec.Usage); got != total {
		t.Errorf("run usage %+v, want the server's sum %+v", got, total)
	}
	if shown.Usage != asWire(total) {
		t.Errorf("run usage in JSON %+v, want %+v", shown.Usage, asWire(total))
	}
	evMu.Lock()
	var evSum model.Usage
	for _, u := range events {
		evSum = evSum.Add(tokens(u))
	}
	if len(events) != len(calls) || evSum != total {
		t.Errorf("%d model.call events summing %+v, want %d summing %+v", len(events), evSum, len(calls), total)
	}
	evMu.Unlock()

	// 3. The budgets count every input token, cached or not.
	for kind, want := range map[limits.Kind]int64{
		limits.KindTokens:       total.InputTokens + total.OutputTokens,
		limits.KindInputTokens:  total.InputTokens,
		limits.KindOutputTokens: total.OutputTokens,
	} {
		if a := rec.Budget[kind]; a != (limits.Amount{Used: want, Limit: budget}) {
			t.Errorf("budget %s: %+v, want used %d of %d", kind, a, want, budget)
		}
		if a := shown.Budget[string(kind)]; a.Used != want {
			t.Errorf("budget %s in JSON: used %d, want %d", kind, a.Used, want)
		}
	}

	// The cost: cache reads at cached_input, writes at cache_write, the
	// rest of the input at input, the output at output.
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	cost := func(u model.Usage) float64 {
		rest := u.InputTokens - u.CacheReadTokens - u.CacheWriteTokens
		return (float64(rest)*input + float64(u.CacheReadTokens)*cachedInput +
			float64(u.CacheWriteTokens)*cacheWrite + float64(u.OutputTokens)*output) / 1e6
	}
	var sum float64
	for _, th := range rec.Threads {
		want := cost(byTask[taskOf[th.Name]])
		if th.CostUSD == nil || !near(*th.CostUSD, want) {
			t.Errorf("thread %s: cost %v, want %v", th.Name, th.CostUSD, want)
			continue
		}
		sum += *th.CostUSD
	}
	want := cost(total)
	if rec.CostUSD == nil || !near(*rec.CostUSD, want) || !near(want, sum) {
		t.Errorf("run cost %v, want %v (the threads' sum %v)", rec.CostUSD, want, sum)
	}
	if shown.CostUSD == nil || !near(*shown.CostUSD, want) {
		t.Errorf("run cost in JSON %v, want %v", shown.CostUSD, want)
	}
	// Not what it would cost without the cache prices.
	if flat := float64(total.InputTokens)*input/1e6 + float64(total.OutputTokens)*output/1e6; near(want, flat) {
		t.Errorf("cost %v is the flat price %v: the test's usage caches nothing", want, flat)
	}
	var where []string
	for _, c := range calls {
		where = append(where, fmt.Sprintf("%q: %s", c.task, strings.Join(c.breakpoints, " ")))
	}
	t.Logf("requests:\n%s\nrun usage %+v, cost $%.6f", strings.Join(where, "\n"), total, want)
}
