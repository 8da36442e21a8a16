package runner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
)

// ModelOpener turns a model reference into a model. Models are opened once per
// reference and shared by every thread that uses it.
type ModelOpener interface {
	Open(ref string) (model.Model, error)
}

// ModelOpenerFunc adapts a function to a ModelOpener.
type ModelOpenerFunc func(ref string) (model.Model, error)

// Open calls f.
func (f ModelOpenerFunc) Open(ref string) (model.Model, error) { return f(ref) }

// HarnessConfig tunes the base tools of every thread.
type HarnessConfig struct {
	// BashTimeout is bash's default timeout.
	BashTimeout time.Duration
	// Sandbox confines bash calls; nil runs them unconfined.
	Sandbox *sandbox.Sandbox
}

// Config configures a Runner. Zero values mean defaults.
type Config struct {
	// Models opens model references. Required.
	Models ModelOpener
	// DefaultModel is used by agents whose spec names no model.
	DefaultModel string
	// Spawner runs helpers. Required.
	Spawner Spawner
	// Tools are extra direct tools that specs may name, beside `agent` and the
	// base tools.
	Tools []tools.Tool
	// Events receives everything that happens; nil discards.
	Events event.Sink
	// Journal keeps each thread's journal; nil keeps none.
	Journal Journal
	// Approver answers `ask` decisions; nil denies them.
	Approver policy.Approver
	// CallGuard, when set, is asked right before every tool call but
	// `agent` starts; an error stops the call, and its text is the tool
	// result. A worker refuses side effects here for a thread whose
	// placement may have been superseded.
	CallGuard func(ctx context.Context, th *thread.Thread) error
	Harness   HarnessConfig
	Logger    *slog.Logger
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// Observer, when set, is told of every model and tool call (metrics).
	Observer Observer
	// MCP, when set, is this process's MCP servers: the tools of those a
	// spec names in harness.mcp are shim tools like the base tools.
	MCP MCPServers
	// MaxToolCalls bounds the tool calls of one model response that run
	// (agent calls, which start helpers, included; handoffs not counted):
	// the calls past it are answered with an error and run nothing.
	// Default DefaultMaxToolCalls.
	MaxToolCalls int
}

// DefaultMaxToolCalls is the default MaxToolCalls: the default ceiling of
// a run's agent_max_threads (coordinator --max-agent-threads), so a turn
// may start as many helpers as any run may have live at once.
const DefaultMaxToolCalls = 256

// MCPServers mounts the operator's MCP servers (internal/mcp.Pool).
type MCPServers interface {
	// Hold marks a thread of run as running; release closes the run's
	// server sessions once none of its threads here holds them.
	Hold(runID string) (release func())
	// Tools returns the named servers' tools for thread threadID of run
	// runID working in cwd; an unknown server is an error.
	Tools(ctx context.Context, runID, threadID, cwd string, servers []string) ([]tools.Tool, error)
	// Version changes when a server's tool list changes.
	Version() uint64
}

// Observer watches calls as they end. Calls must be cheap: they run on the
// agent loop.
type Observer interface {
	// ModelCall reports one model call (retries included) of provider's model.
	ModelCall(provider, model string, d time.Duration, input, output int64, err error)
	// ModelRetry reports a model call about to be retried, reason being
	// rate_limited or server_error.
	ModelRetry(provider, reason string)
	// ToolCall reports one tool call's outcome: ok, error or denied.
	ToolCall(tool, outcome string, d time.Duration)
}

// Tool call outcomes an Observer sees.
const (
	ToolOK     = "ok"
	ToolError  = "error"
	ToolDenied = "denied"
)

// Runner runs agent threads. It is safe for concurrent use by many runs.
type Runner struct {
	cfg     Config
	models  sync.Map // ref -> model.Model
	schemas sync.Map // schema text -> *compiledSchema
	// harnesses caches base tool sets by directory (see baseTools).
	harnesses    sync.Map
	harnessCount atomic.Int64
	// toolsets caches toolsets threads share (see toolsFor).
	toolsets     sync.Map
	toolsetCount atomic.Int64
	registry     map[string]tools.Tool
}

// New returns a runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Models == nil {
		return nil, fmt.Errorf("%w: no model opener", ErrBadRequest)
	}
	if cfg.Spawner == nil {
		return nil, fmt.Errorf("%w: no spawner", ErrBadRequest)
	}
	cfg.Events = cmp.Or(cfg.Events, event.Discard)
	cfg.Approver = cmp.Or(cfg.Approver, policy.DenyAll)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxToolCalls <= 0 {
		cfg.MaxToolCalls = DefaultMaxToolCalls
	}
	r := &Runner{cfg: cfg, registry: map[string]tools.Tool{tools.AgentToolName: agentTool{}}}
	for _, t := range cfg.Tools {
		r.registry[t.Name()] = t
	}
	return r, nil
}

func (r *Runner) emit(e event.Event) {
	if e.Time.IsZero() {
		e.Time = r.cfg.Now()
	}
	r.cfg.Events.Emit(e)
}

func (r *Runner) model(ref string) (model.Model, error) {
	if m, ok := r.models.Load(ref); ok {
		return m.(model.Model), nil
	}
	m, err := r.cfg.Models.Open(ref)
	if err != nil {
		return nil, err
	}
	actual, _ := r.models.LoadOrStore(ref, m)
	return actual.(model.Model), nil
}
