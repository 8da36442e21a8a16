package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// fakeModel answers with a function of the request and records every request,
// so tests can see exactly what each thread's model was shown.
type fakeModel struct {
	ref string
	fn  func(ctx context.Context, req model.Request) (model.Response, error)

	mu   sync.Mutex
	reqs []model.Request
}

func (m *fakeModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.fn(ctx, req)
}

func (m *fakeModel) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.reqs...)
}

// models is a ModelOpener over a fixed set of fakes.
type models map[string]*fakeModel

func (ms models) Open(ref string) (model.Model, error) {
	m, ok := ms[ref]
	if !ok {
		return nil, fmt.Errorf("%w: %s", model.ErrUnknownProvider, ref)
	}
	return m, nil
}

// task is the first user message: what the thread was asked.
func task(req model.Request) string {
	for _, m := range req.Messages {
		if m.Role == model.RoleUser {
			return m.Content
		}
	}
	return ""
}

// toolResults returns the tool messages after the last assistant message.
func toolResults(req model.Request) []model.Message {
	var out []model.Message
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == model.RoleTool; i-- {
		out = append([]model.Message{req.Messages[i]}, out...)
	}
	return out
}

func hasToolResults(req model.Request) bool { return len(toolResults(req)) > 0 }

func call(id, name string, args any) model.ToolCall {
	b, _ := json.Marshal(args)
	return model.ToolCall{ID: id, Name: name, Arguments: string(b)}
}

func spawnCall(id, name, task string) model.ToolCall {
	return call(id, tools.AgentToolName, map[string]string{"name": name, "task": task})
}

func joinResults(req model.Request) string {
	var parts []string
	for _, m := range toolResults(req) {
		parts = append(parts, m.Content)
	}
	return strings.Join(parts, "|")
}

func text(s string) model.Response {
	return model.Response{Text: s, Usage: model.Usage{InputTokens: 10, OutputTokens: 1}}
}

func calls(cs ...model.ToolCall) model.Response {
	return model.Response{ToolCalls: cs, Usage: model.Usage{InputTokens: 10, OutputTokens: 1}}
}

// collector is an event sink tests can query.
type collector struct {
	mu     sync.Mutex
	events []event.Event
	hook   func(event.Event)
}

func (c *collector) Emit(e event.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	if c.hook != nil {
		c.hook(e)
	}
}

func (c *collector) of(t event.Type) []event.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []event.Event
	for _, e := range c.events {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

type setup struct {
	models   models
	events   *collector
	approver policy.Approver
	cwd      string
	// maxToolCalls is the runner's MaxToolCalls; 0: the default.
	maxToolCalls int
}

func newRunner(t *testing.T, s setup) *Runner {
	t.Helper()
	if s.events == nil {
		s.events = &collector{}
	}
	r, err := newInProcess(Config{Models: s.models, Events: s.events, Approver: s.approver, DefaultModel: "fake:root",
		MaxToolCalls: s.maxToolCalls})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func generalAgent() spec.Agent {
	return spec.Agent{Name: "root", Instructions: "ROOT SECRET PROMPT", Tools: []string{tools.AgentToolName}}
}

func run(t *testing.T, r *Runner, req RunRequest) RunResult {
	t.Helper()
	if req.Cwd == "" {
		req.Cwd = t.TempDir()
	}
	res, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func limitsFor(n int) limits.Config { return limits.Config{MaxThreads: max(n, 1)} }
