// Command worker hosts Formica agent threads: it connects to NATS, registers
// with the coordinators, runs up to --slots threads at a time with its own
// tools and model credentials, and drains on SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/envflag"
	"github.com/formica-run/formica/internal/logging"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/ops"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tracing/export"
	"github.com/formica-run/formica/internal/version"
	"github.com/formica-run/formica/internal/worker"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// options are the worker's settings, bound to its flags.
type options struct {
	client    broker.ClientConfig
	wc        worker.Config
	grace     time.Duration
	logLevel  string
	logFormat string
	mcpFile   string
	httpAddr  string
	version   bool
	sbf       sandbox.Flags
}

// newFlags registers every flag of the worker; each one can also be set from
// the environment (package envflag).
func newFlags() (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	o := &options{client: broker.ClientConfig{URLs: []string{"nats://127.0.0.1:4222"}}}
	fs.DurationVar(&o.grace, "drain-grace", 30*time.Second, "on SIGTERM, how long running threads may finish before they are cancelled")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log line format: text or json")
	fs.StringVar(&o.mcpFile, "mcp-config", "", mcp.FlagUsage)
	fs.StringVar(&o.httpAddr, "http", "off", "`addr` serving /healthz, /readyz and /metrics (e.g. 127.0.0.1:9090); \"off\" disables it")
	o.client.RegisterFlags(fs)
	fs.StringVar(&o.wc.ID, "id", "", "worker id (one word); default host-random")
	fs.IntVar(&o.wc.Slots, "slots", worker.DefaultSlots, "threads run at once (threads waiting on helpers hold none)")
	fs.DurationVar(&o.wc.HeartbeatInterval, "heartbeat", worker.DefaultHeartbeatInterval, "heartbeat interval")
	fs.BoolVar(&o.wc.AllowScripted, "allow-scripted", false, "let threads open scripted:<file> models (for tests)")
	fs.DurationVar(&o.wc.Harness.BashTimeout, "bash-timeout", 0, "default timeout of the bash tool")
	o.sbf.Register(fs)
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	return fs, o
}

func run(args []string) error {
	fs, o := newFlags()
	if err := envflag.Parse(fs, args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		os.Exit(2)
	}
	if o.version {
		fmt.Println(version.String("worker"))
		return nil
	}
	client, wc, grace, logLevel := o.client, o.wc, &o.grace, &o.logLevel
	logger, err := logging.New(os.Stderr, *logLevel, o.logFormat)
	if err != nil {
		return err
	}
	sb, err := o.sbf.Open()
	if err != nil {
		return err
	}
	if sb == nil {
		logger.Warn("sandbox off: tool calls run unconfined, as this worker's user, with its view of the host")
	} else {
		defer sb.Close()
		logger.Info("sandbox on", "tools", sb.Info().String())
	}
	wc.Harness.Sandbox = sb
	if wc.MCP, err = mcp.Open(o.mcpFile, sb, logger); err != nil {
		return err
	}
	if wc.MCP != nil {
		defer wc.MCP.Close()
		logger.Info("MCP servers", "names", wc.MCP.Names())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Deferred first, run last: the spans of threads ended by the drain are flushed.
	stopTracing, err := export.Start(ctx, "formica-worker", logger)
	if err != nil {
		return err
	}
	defer stopTracing()

	client.Name, client.Logger = "formica-worker", logger
	if client.Creds != "" {
		// The credentials name the worker: its subjects and its inbox.
		id, err := auth.ReadCredsFile(client.Creds)
		if err != nil {
			return err
		}
		if id.Role != auth.Worker {
			return fmt.Errorf("--nats-creds %s: %s credentials, want a worker's", client.Creds, id.Role)
		}
		if wc.ID != "" && wc.ID != id.ID {
			return fmt.Errorf("--id %s, but --nats-creds %s are worker %s's", wc.ID, client.Creds, id.ID)
		}
		wc.ID = id.ID
		if client.InboxPrefix == "" {
			client.InboxPrefix = auth.InboxPrefix(auth.Worker, id.ID)
		}
	}
	nc, err := broker.Connect(ctx, client)
	if err != nil {
		return err
	}
	defer broker.Drain(nc, 5*time.Second)
	wc.Conn, wc.Models, wc.Logger = nc, runner.ModelOpenerFunc(providers.Open), logger
	mx := metrics.New()
	wc.Metrics = mx
	// Results larger than the NATS max payload travel through the object store.
	if st, err := store.OpenTransfers(ctx, nc); err != nil {
		logger.Warn("no JetStream run store: results over the NATS max payload will fail and threads keep no journal", "err", err)
	} else {
		wc.Offloader = st
		wc.Journal = func(run, thread, token string) runner.ThreadJournal { return st.Journal(run, thread, token, false) }
	}
	w, err := worker.New(wc)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	if o.httpAddr != "off" && o.httpAddr != "" {
		srv, err := ops.Start(ops.Config{Addr: o.httpAddr, Metrics: mx.Handler(), Logger: logger,
			Ready: func(context.Context) error { return w.Ready() }})
		if err != nil {
			w.Stop()
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
		logger.Info("http listening", "addr", srv.Addr())
	}
	logger.Info("worker ready", "id", w.ID(), "slots", wc.Slots)
	<-ctx.Done()
	logger.Info("draining", "grace", *grace)
	return w.Drain(*grace)
}
