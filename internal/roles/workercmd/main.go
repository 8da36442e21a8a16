// Package workercmd is the worker command, run by cmd/worker and by the
// formica binary under the name worker: it hosts Formica agent threads,
// connects to NATS, registers with the coordinators, runs up to --slots
// threads at a time with its own tools and model credentials, and drains
// on SIGTERM.
package workercmd

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/dirlock"
	"github.com/formica-run/formica/internal/logging"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/ops"
	"github.com/formica-run/formica/internal/roles/role"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tracing/export"
	"github.com/formica-run/formica/internal/version"
	"github.com/formica-run/formica/internal/worker"
)

// Main runs the worker command with os.Args and exits on failure.
func Main() {
	fs, o := newFlags()
	role.Main(fs, &o.Flags, func() error { return run(o) })
}

// options are the worker's settings, bound to its flags.
type options struct {
	role.Flags
	connectTimeout time.Duration
	wc             worker.Config
	grace          time.Duration
	httpAddr       string
	credsPool      string
}

// newFlags registers every flag of the worker; each one can also be set from
// the environment (package envflag).
func newFlags() (*flag.FlagSet, *options) {
	o := &options{Flags: role.Flags{Client: broker.ClientConfig{URLs: []string{"nats://127.0.0.1:4222"}}}}
	fs := o.NewFlagSet("worker", `  worker [flags]               run a worker
  worker healthcheck [--ready] probe a running worker's /healthz (or /readyz) on its --http, exit 0 if healthy
`, "")
	fs.DurationVar(&o.grace, "drain-grace", 30*time.Second, "on SIGTERM, how long running threads may finish before they are cancelled")
	fs.StringVar(&o.credsPool, "nats-creds-pool", "", "`dir` of worker credentials files (*.creds): take the first one no other worker on this host holds (instead of --nats-creds), for replicas that scale")
	fs.DurationVar(&o.connectTimeout, "connect-timeout", 0, "give up when NATS cannot be reached for this long at start-up (0: keep trying)")
	fs.StringVar(&o.httpAddr, "http", "off", "`addr` serving /healthz, /readyz and /metrics (e.g. 127.0.0.1:9090); \"off\" disables it")
	fs.StringVar(&o.wc.ID, "id", "", "worker id (one word); default host-random")
	fs.IntVar(&o.wc.Slots, "slots", worker.DefaultSlots, "threads run at once (threads waiting on helpers hold none)")
	fs.DurationVar(&o.wc.HeartbeatInterval, "heartbeat", worker.DefaultHeartbeatInterval, "heartbeat interval")
	fs.BoolVar(&o.wc.AllowScripted, "allow-scripted", false, "let threads open scripted:<file> models (for tests)")
	fs.DurationVar(&o.wc.Harness.BashTimeout, "bash-timeout", 0, "default timeout of the bash tool")
	fs.IntVar(&o.wc.MaxToolCalls, "max-tool-calls", runner.DefaultMaxToolCalls, "tool calls of one model response that run (agent calls included); the rest are answered with an error and run nothing")
	return fs, o
}

func run(o *options) error {
	logger, err := logging.New(os.Stderr, o.LogLevel, o.LogFormat)
	if err != nil {
		return err
	}
	models, prices := o.Models(logger)
	sb, err := o.Sandbox.Open()
	if err != nil {
		return err
	}
	if sb == nil {
		logger.Warn("sandbox off: tool calls run unconfined, as this worker's user, with its view of the host")
	} else {
		defer sb.Close()
		logger.Info("sandbox on", "tools", sb.Info().String())
	}
	mcpPool, err := mcp.Open(o.MCPFile, sb, logger)
	if err != nil {
		return err
	}
	if mcpPool != nil {
		defer mcpPool.Close()
		logger.Info("MCP servers", "names", mcpPool.Names())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Deferred first, run last: the spans of threads ended by the drain are flushed.
	stopTracing, err := export.Start(ctx, "formica-worker", logger)
	if err != nil {
		return err
	}
	defer stopTracing()

	// The listener answers from the start: up while NATS is still out of
	// reach, ready once the worker can take threads.
	mx := metrics.New(metrics.Worker)
	var running atomic.Pointer[worker.Worker]
	if o.httpAddr != "off" && o.httpAddr != "" {
		srv, err := ops.Start(ops.Config{Addr: o.httpAddr, Metrics: mx.Handler(), Logger: logger,
			Ready: func(context.Context) error {
				if w := running.Load(); w != nil {
					return w.Ready()
				}
				return errors.New("starting: NATS not connected yet")
			}})
		if err != nil {
			return err
		}
		defer role.Shutdown(srv)
		logger.Info("http listening", "addr", srv.Addr())
	}

	client := o.Client
	client.Name, client.Logger = "formica-worker", logger
	wc := o.wc
	if o.credsPool != "" {
		if client.Creds != "" {
			return errors.New("give --nats-creds or --nats-creds-pool, not both")
		}
		path, held, err := dirlock.TakeFree(o.credsPool, "*.creds")
		if err != nil {
			return fmt.Errorf("--nats-creds-pool: %w", err)
		}
		defer held.Release()
		client.Creds = path
		logger.Info("credentials taken from the pool", "creds", path)
	}
	if client.Creds != "" {
		// The credentials name the worker: its subjects and its inbox.
		id, err := auth.CheckRole(client.Creds, "a worker", auth.Worker)
		if err != nil {
			return err
		}
		if wc.ID != "" && wc.ID != id.ID {
			return fmt.Errorf("--id %s, but --nats-creds %s are worker %s's", wc.ID, client.Creds, id.ID)
		}
		wc.ID = id.ID
		client.InboxPrefix = cmp.Or(client.InboxPrefix, auth.InboxPrefix(auth.Worker, id.ID))
	}
	nc, err := broker.ConnectRetry(ctx, client, o.connectTimeout)
	if broker.Refused(err) {
		return fmt.Errorf("%w; %s", err, auth.Remedy(auth.Worker))
	}
	if err != nil {
		return err
	}
	defer broker.Drain(nc, 5*time.Second)
	wc.Harness.Sandbox, wc.MCP = sb, mcpPool
	wc.Conn, wc.Models, wc.Logger = nc, models, logger
	wc.Metrics, wc.Prices = mx, prices
	wc.ID = cmp.Or(wc.ID, worker.NewID())
	// Results larger than the NATS max payload travel through the object store.
	if st, err := store.OpenTransfers(ctx, nc, wc.ID, store.Config{Logger: logger, JournalFailed: mx.JournalWriteFailed}); err != nil {
		logger.Warn("no JetStream run store: results over the NATS max payload will fail and threads keep no journal", "err", err)
	} else {
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
	running.Store(w)
	logger.Info("worker ready", "id", w.ID(), "slots", wc.Slots, "version", version.Version())
	<-ctx.Done()
	stop() // a second signal ends the process at once
	logger.Info("draining", "grace", o.grace)
	return w.Drain(o.grace)
}
