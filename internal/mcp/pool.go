package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// DefaultOutputCap bounds the text a call returns when Config gives none.
const DefaultOutputCap = 30000

// Config configures a Pool.
type Config struct {
	// Servers are the operator's servers (Load or Parse).
	Servers Servers
	// Sandbox confines stdio servers; nil runs them unconfined, as process
	// groups of this process's user.
	Sandbox *sandbox.Sandbox
	// OutputCap bounds a call's result text in bytes (default DefaultOutputCap).
	OutputCap int
	Logger    *slog.Logger
}

// Pool holds the sessions of every run on this worker. It is safe for
// concurrent use.
type Pool struct {
	cfg     Config
	version atomic.Uint64

	mu   sync.Mutex
	runs map[string]*runSessions
	// procs counts the stdio servers still running, for Close.
	procs sync.WaitGroup
}

type runSessions struct {
	holds    int
	sessions map[sessionKey]*session
}

type sessionKey struct{ server, cwd string }

// New returns a pool of cfg's servers; none is started until a thread uses it.
func New(cfg Config) (*Pool, error) {
	for name := range cfg.Servers {
		if !spec.ValidServerName(name) {
			return nil, fmt.Errorf("%w: server name %q", ErrBadConfig, name)
		}
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &Pool{cfg: cfg, runs: map[string]*runSessions{}}, nil
}

// Names returns the configured server names, sorted (what a worker announces).
func (p *Pool) Names() []string {
	if p == nil {
		return nil
	}
	return p.cfg.Servers.Names()
}

// Version changes whenever a server says its tool list changed, so a
// thread knows to list its tools again.
func (p *Pool) Version() uint64 { return p.version.Load() }

// Hold marks a thread of run as running here; release, called when it
// ends, closes the run's sessions once no thread of the run holds them.
func (p *Pool) Hold(runID string) (release func()) {
	p.mu.Lock()
	rs := p.runLocked(runID)
	rs.holds++
	p.mu.Unlock()
	return sync.OnceFunc(func() {
		p.mu.Lock()
		rs.holds--
		var closing []*session
		if rs.holds == 0 {
			delete(p.runs, runID)
			closing = slices.AppendSeq(closing, maps.Values(rs.sessions))
		}
		p.mu.Unlock()
		for _, s := range closing {
			s.close()
		}
	})
}

// Tools returns the tools of the named servers for thread threadID of run
// runID (both sent to servers as request metadata) working in cwd (a stdio
// server's cwd), each named mcp__<server>__<tool>, in server order then the
// server's order. A name the worker lacks is an error wrapping
// ErrUnknownServer; a server that cannot start or list is an error wrapping
// ErrServer.
func (p *Pool) Tools(ctx context.Context, runID, threadID, cwd string, servers []string) ([]tools.Tool, error) {
	var out []tools.Tool
	for _, name := range servers {
		srv, ok := p.cfg.Servers[name]
		if !ok {
			have := cmp.Or(strings.Join(p.Names(), ", "), "none")
			return nil, fmt.Errorf("%w: %q is not configured on this worker (its MCP servers: %s)", ErrUnknownServer, name, have)
		}
		s := p.session(runID, name, cwd, srv)
		listed, err := s.list(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range listed {
			full := ToolName(name, t.Name)
			if full == "" {
				p.cfg.Logger.Warn("MCP tool left out: its name does not make a valid tool name", "server", name, "tool", t.Name)
				continue
			}
			schema, err := json.Marshal(t.InputSchema)
			if err != nil || t.InputSchema == nil {
				schema = []byte(`{"type":"object"}`)
			}
			out = append(out, &Tool{name: full, tool: t.Name, desc: t.Description, schema: schema,
				s: s, threadID: threadID, outputCap: p.cfg.OutputCap})
		}
	}
	return tools.Merge(out), nil
}

func (p *Pool) session(runID, name, cwd string, srv Server) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.runLocked(runID)
	k := sessionKey{name, cwd}
	s := rs.sessions[k]
	if s == nil {
		s = &session{p: p, name: name, srv: srv, runID: runID, cwd: cwd}
		rs.sessions[k] = s
	}
	return s
}

// runLocked returns the sessions of run runID, made when it has none. A run
// not held (a caller outside a thread) keeps its sessions until Close.
func (p *Pool) runLocked(runID string) *runSessions {
	rs := p.runs[runID]
	if rs == nil {
		rs = &runSessions{sessions: map[sessionKey]*session{}}
		p.runs[runID] = rs
	}
	return rs
}

// Close stops every server of every run. Safe to call twice.
func (p *Pool) Close() error {
	p.mu.Lock()
	var all []*session
	for id, rs := range p.runs {
		all = slices.AppendSeq(all, maps.Values(rs.sessions))
		delete(p.runs, id)
	}
	p.mu.Unlock()
	for _, s := range all {
		s.close()
	}
	done := make(chan struct{})
	go func() { p.procs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%w: servers still stopping after 10s", ErrServer)
	}
	return nil
}

// ToolName is the harness name of server's tool: mcp__<server>__<tool>,
// with characters the model providers refuse in tool names made '_'; ""
// when the result is longer than the providers' 64 characters.
func ToolName(server, tool string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, tool)
	name := ToolPrefix + server + "__" + clean
	if tool == "" || len(name) > 64 {
		return ""
	}
	return name
}

// Metadata keys sent in every tools/call request's _meta, for the server's
// audit log.
const (
	MetaRunID    = "formica/run_id"
	MetaThreadID = "formica/thread_id"
)
