// Package embedded starts a whole Formica cluster in one process: an embedded
// NATS server, a coordinator and local workers, each on its own in-process
// connection so every spawn still travels the real NATS path. It is the
// default of `formica run` and what `coordinator --local-workers` adds.
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/pricing"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/worker"
)

// Config configures a Stack.
type Config struct {
	// Server configures the embedded NATS server; ignored with Conn.
	Server broker.ServerConfig
	// Authority, when set, secures the embedded server (operator mode, see
	// package auth): every component connects in-process with credentials
	// of its own role issued in memory, so nothing secret is on disk but
	// the authority's own seeds.
	Authority *auth.Authority
	// Connect, when set, makes the stack use an external NATS instead of
	// starting a server: it is called once per component.
	Connect func(name string) (*nats.Conn, error)
	// LocalServer, with Connect, is the server Connect reaches when it runs
	// in this process: the coordinator then asks it who listens, as it asks
	// the server the stack starts itself.
	LocalServer *broker.Server
	// NoCoordinator starts only workers (a worker process).
	NoCoordinator bool
	Coordinator   coordinator.Config
	// Durable opens the JetStream run store for the coordinator: the
	// submission queue, run records, the events stream, held approvals.
	Durable bool
	Store   store.Config
	// Workers is how many local workers to start, each with Slots slots.
	Workers int
	Slots   int
	Models  runner.ModelOpener
	Harness runner.HarnessConfig
	// WorkerIDs, when set, are the local workers' ids (one per worker);
	// otherwise each has a new random one (worker.NewID).
	WorkerIDs []string
	// MCP, when set, is the local workers' MCP servers.
	MCP *mcp.Pool
	// AllowScripted lets local workers open scripted:<file> models.
	AllowScripted bool
	// HeartbeatInterval for coordinator and workers; 0 means one second.
	HeartbeatInterval time.Duration
	Logger            *slog.Logger
	// Metrics, when set, is the process's metrics: the coordinator's (unless
	// Coordinator.Metrics is set) and the local workers'.
	Metrics *metrics.Metrics
	// Prices prices the local workers' model calls; nil: the built-in defaults.
	Prices *pricing.Table
	// MaxToolCalls bounds the tool calls of one model response that the
	// local workers run; 0: runner.DefaultMaxToolCalls.
	MaxToolCalls int
}

// Stack is a running set of components.
type Stack struct {
	Server      *broker.Server // nil with an external NATS
	Coordinator *coordinator.Coordinator
	Store       *store.Store // nil unless Durable
	Workers     []*worker.Worker
	conns       []*nats.Conn
	connect     func(name string) (*nats.Conn, error)
	authority   *auth.Authority
}

// Start starts the stack's components and returns once workers have
// announced themselves.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	s := &Stack{connect: cfg.Connect, authority: cfg.Authority}
	if cfg.Store.JournalFailed == nil && cfg.Metrics != nil {
		cfg.Store.JournalFailed = cfg.Metrics.JournalWriteFailed
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.connect == nil {
		if !cfg.Durable && cfg.Server.MaxPayload == 0 {
			// Without JetStream nothing can carry a body by reference, so
			// allow NATS's largest messages instead.
			cfg.Server.MaxPayload = 64 << 20
		}
		if s.authority != nil {
			cfg.Server.Trust = s.authority
		}
		if s.Server, err = broker.StartServer(ctx, cfg.Server); err != nil {
			return nil, err
		}
	}
	if !cfg.NoCoordinator {
		nc, err := s.Connect("formica-coordinator")
		if err != nil {
			return nil, err
		}
		cc := cfg.Coordinator
		cc.Conn = nc
		if cfg.Durable {
			if s.Server != nil && cfg.Server.Cluster != nil {
				if err := s.Server.WaitJetStreamReady(ctx); err != nil {
					return nil, err
				}
			}
			sc := cfg.Store
			sc.Logger = cmp.Or(sc.Logger, cfg.Logger)
			if s.Store, err = store.Open(ctx, nc, sc); err != nil {
				return nil, err
			}
			cc.Store = s.Store
		}
		cc.Logger = cmp.Or(cc.Logger, cfg.Logger)
		cc.HeartbeatInterval = cmp.Or(cc.HeartbeatInterval, cfg.HeartbeatInterval)
		cc.Metrics = cmp.Or(cc.Metrics, cfg.Metrics)
		local := cmp.Or(s.Server, cfg.LocalServer)
		if cc.Interest == nil && local != nil {
			// Its own server knows who listens: events nobody follows
			// (no watcher, no events stream) are not sent at all.
			if cc.Interest, err = local.InterestOf(nc); err != nil {
				return nil, err
			}
		}
		if s.Coordinator, err = coordinator.New(cc); err != nil {
			return nil, err
		}
		if err := s.Coordinator.Start(ctx); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Workers {
		id := worker.NewID()
		if i < len(cfg.WorkerIDs) {
			id = cfg.WorkerIDs[i]
		}
		if err := s.startWorker(ctx, cfg, id, fmt.Sprintf("formica-worker-%d", i+1)); err != nil {
			return nil, err
		}
	}
	if s.Coordinator != nil && len(s.Workers) > 0 {
		if err := s.waitWorkers(ctx, len(s.Workers)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startWorker starts local worker id, named name on its connection, as
// cfg has local workers, and adds it to s.Workers.
func (s *Stack) startWorker(ctx context.Context, cfg Config, id, name string) error {
	nc, err := s.ConnectAs(auth.Worker, id, name)
	if err != nil {
		return err
	}
	wc := worker.Config{ID: id, Conn: nc, Slots: cfg.Slots, Models: cfg.Models, Harness: cfg.Harness,
		HeartbeatInterval: cfg.HeartbeatInterval, AllowScripted: cfg.AllowScripted, Logger: cfg.Logger,
		Metrics: cfg.Metrics, MCP: cfg.MCP, Prices: cfg.Prices, MaxToolCalls: cfg.MaxToolCalls}
	if s.Store != nil {
		// On the worker's own connection, as a worker process has it: its
		// journal writes and their acks stay off the coordinator's, a
		// helper's end goes out before its result on the one connection,
		// and it writes bodies over the max payload into its own place.
		sc := store.Config{Logger: cfg.Logger, JournalFailed: cfg.Store.JournalFailed}
		st, err := store.OpenTransfers(ctx, nc, id, sc)
		if err != nil {
			return err
		}
		wc.Offloader = st
		wc.Journal = func(run, thread, token, proof string) runner.ThreadJournal {
			return st.Journal(run, thread, token, false).Proven(proof).Batched(store.JournalLinger)
		}
	}
	w, err := worker.New(wc)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	s.Workers = append(s.Workers, w)
	return nil
}

// Connect opens another connection to the stack's NATS, closed by Stop:
// ConnectAs with the coordinator's credentials.
func (s *Stack) Connect(name string) (*nats.Conn, error) {
	return s.ConnectAs(auth.Coordinator, "coordinator", name)
}

// ConnectAs opens another connection with credentials of role under id,
// closed by Stop. Without an Authority role and id change nothing.
func (s *Stack) ConnectAs(role auth.Role, id, name string) (*nats.Conn, error) {
	nc, err := s.dial(role, id, name)
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, nc)
	return nc, nil
}

// dial opens a connection: with Config.Connect to an external NATS, or in
// process, with credentials of role under id issued in memory when the
// server is secured.
func (s *Stack) dial(role auth.Role, id, name string) (*nats.Conn, error) {
	if s.Server == nil {
		return s.connect(name)
	}
	if s.authority == nil {
		return s.Server.Connect(name)
	}
	creds, err := s.authority.Issue(role, id)
	if err != nil {
		return nil, err
	}
	return s.Server.Connect(name, creds.Options()...)
}

// waitWorkers waits until the coordinator has seen n workers.
func (s *Stack) waitWorkers(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(s.Coordinator.Workers()) < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: %d of %d workers registered: %w", len(s.Coordinator.Workers()), n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// Drain drains the coordinator (see coordinator.Drain: no new runs, the
// running ones get grace to finish, the rest go back to the queue) while
// local workers keep serving it, then stops everything like Stop.
func (s *Stack) Drain(grace time.Duration) error {
	var err error
	if s.Coordinator != nil {
		err = s.Coordinator.Drain(grace)
	}
	return errors.Join(err, s.Stop())
}

// Stop stops workers, then the coordinator, drains the connections and shuts
// the server down. Safe to call twice.
func (s *Stack) Stop() error {
	var errs []error
	for _, w := range s.Workers {
		errs = append(errs, w.Stop())
	}
	s.Workers = nil
	if s.Coordinator != nil {
		errs = append(errs, s.Coordinator.Stop())
		s.Coordinator = nil
	}
	for _, nc := range s.conns {
		if !nc.IsClosed() {
			errs = append(errs, broker.Drain(nc, 5*time.Second))
		}
	}
	s.conns = nil
	if s.Server != nil {
		s.Server.Shutdown()
	}
	return errors.Join(errs...)
}
