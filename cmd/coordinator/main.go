// Command coordinator runs Formica's control plane: by default with an
// embedded NATS server (JetStream on, stored under --data-dir), or on an
// external NATS cluster with --nats. It takes queued runs, keeps their
// records, and serves the HTTP API. With --local-workers it also hosts
// workers, so one process runs everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/logging"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tracing/export"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "creds" {
		if err := creds(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "coordinator creds:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	var (
		server       = broker.ServerConfig{DataDir: "formica-data", JetStream: true}
		client       broker.ClientConfig
		cc           coordinator.Config
		sc           store.Config
		hc           = api.Config{Token: os.Getenv("FORMICA_HTTP_TOKEN")}
		localWorkers = fs.Int("local-workers", 0, "workers to host in this process")
		mcpFile      = fs.String("mcp-config", "", mcp.FlagUsage+" (for --local-workers)")
		insecure     = fs.Bool("nats-insecure", false, "let NATS clients connect over TCP without credentials (loopback only; logs a warning)")
		tlsCert      = fs.String("nats-tls-cert", "", "certificate `file` (PEM) of the NATS listener; enables TLS")
		tlsKey       = fs.String("nats-tls-key", "", "private key `file` (PEM) of --nats-tls-cert")
		tlsCA        = fs.String("nats-tls-client-ca", "", "CA `file` (PEM): NATS clients must present a certificate it signed")
		scripted     = fs.Bool("allow-scripted", false, "accept submitted runs naming scripted:<file> models (for tests: the file is a path on the workers)")
		slots        = fs.Int("slots", 16, "threads each local worker runs at once")
		logLevel     = fs.String("log-level", "info", "log level: debug, info, warn, error")
		logFormat    = fs.String("log-format", "text", "log line format: text or json")
		traceURL     = fs.String("trace-url", os.Getenv("FORMICA_TRACE_URL"), "link `template` to a run's trace, {trace_id} replaced (e.g. http://jaeger:16686/trace/{trace_id}); the API's run records carry it as trace_url (default $FORMICA_TRACE_URL)")
		model        = fs.String("model", os.Getenv("FORMICA_MODEL"), "model `ref` for submitted agents that name none (default $FORMICA_MODEL, else sim)")
		cwd          = fs.String("cwd", "", "harness `dir` of submitted runs on the workers (default: this process's directory)")
		sbf          sandbox.Flags // of the local workers
	)
	server.RegisterServerFlags(fs)
	client.RegisterFlags(fs)
	sbf.Register(fs)
	fs.StringVar(&cc.ID, "id", "", "coordinator id (one word); default random")
	fs.DurationVar(&cc.HeartbeatInterval, "heartbeat", coordinator.DefaultHeartbeatInterval, "heartbeat and progress interval")
	fs.DurationVar(&cc.PlacementTimeout, "placement-timeout", coordinator.DefaultPlacementTimeout, "how long a thread may wait for a free worker slot")
	fs.IntVar(&cc.MaxAttempts, "max-attempts", coordinator.DefaultMaxAttempts, "placements of a thread whose worker is lost")
	fs.DurationVar(&cc.ApprovalTimeout, "approval-timeout", coordinator.DefaultApprovalTimeout, "how long an approval waits for an answer before it is denied")
	fs.IntVar(&cc.MaxWorkerSlots, "max-worker-slots", coordinator.DefaultMaxWorkerSlots, "cap on the slots one worker may announce")
	fs.IntVar(&cc.MaxRuns, "max-runs", coordinator.DefaultMaxRuns, "queued runs this coordinator runs at once")
	fs.IntVar(&cc.Ceilings.MaxThreads, "max-agent-threads", limits.DefaultCeilingThreads, "ceiling on a submission's agent_max_threads")
	fs.IntVar(&cc.Ceilings.MaxDepth, "max-agent-depth", limits.DefaultCeilingDepth, "ceiling on a submission's agent_max_depth")
	fs.IntVar(&cc.Ceilings.MaxSpawns, "max-spawns", limits.DefaultCeilingSpawns, "helpers one run may ever start (caps budget.spawns)")
	fs.IntVar(&cc.Ceilings.MaxTaskBytes, "max-task-bytes", limits.DefaultCeilingTask, "ceiling on a submission's task, in bytes")
	fs.DurationVar(&cc.Ceilings.MaxRunTimeout, "max-run-timeout", limits.DefaultMaxRunTimeout, "ceiling on a submission's timeout")
	fs.DurationVar(&cc.RunTimeout, "run-timeout", coordinator.DefaultRunTimeout, "deadline of a queued run that asks none; past it the run fails (\"deadline exceeded\")")
	fs.DurationVar(&sc.Retention, "retention", store.DefaultRetention, "how long run records, held approvals and payload objects are kept after their last write")
	fs.DurationVar(&sc.EventsMaxAge, "events-max-age", store.DefaultEventsMaxAge, "how long run events are kept")
	fs.IntVar(&sc.Replicas, "replicas", store.DefaultReplicas, "JetStream replicas of the run store (3 on a NATS cluster)")
	fs.IntVar(&sc.MaxDeliver, "queue-max-deliver", store.DefaultMaxDeliver, "deliveries of a run before it is failed for good (its coordinator died each time)")
	fs.DurationVar(&sc.JournalMaxAge, "journal-max-age", 0, "how long thread journals (resume, transcripts) are kept; 0: 7 days, or --retention if shorter; at most --retention")
	fs.DurationVar(&sc.AckWait, "queue-ack-wait", store.DefaultAckWait, "how long a dead coordinator's run stays claimed before another takes it")
	fs.StringVar(&hc.Addr, "http", "127.0.0.1:8080", "HTTP API `addr`; \"off\" disables it")
	fs.StringVar(&hc.Token, "http-token", hc.Token, "bearer `token` the HTTP API requires (default $FORMICA_HTTP_TOKEN); required beyond loopback")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		os.Exit(2)
	}
	logger, err := logging.New(os.Stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	// Refuse a bad --http before anything starts: not even one queued run
	// may be taken by a coordinator that is about to exit.
	if hc.Addr != "off" {
		if err := api.Check(hc); err != nil {
			if errors.Is(err, api.ErrInsecure) {
				err = fmt.Errorf("--http: %w (give one with --http-token or $FORMICA_HTTP_TOKEN)", err)
			}
			return err
		}
	}
	var sb *sandbox.Sandbox
	if *localWorkers > 0 {
		if sb, err = sbf.Open(); err != nil {
			return err
		}
		if sb == nil {
			logger.Warn("sandbox off: the local workers' tool calls run unconfined")
		} else {
			defer sb.Close()
		}
	}
	var pool *mcp.Pool
	if *mcpFile != "" {
		if *localWorkers == 0 {
			return errors.New("--mcp-config configures the MCP servers of --local-workers; give --local-workers too (or give it to each worker)")
		}
		if pool, err = mcp.Open(*mcpFile, sb, logger); err != nil {
			return err
		}
		defer pool.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Deferred first, run last: spans ended while stopping are flushed.
	stopTracing, err := export.Start(ctx, "formica-coordinator", logger)
	if err != nil {
		return err
	}
	defer stopTracing()

	cc.Cwd, cc.AllowScripted = *cwd, *scripted
	mx := metrics.New()
	cfg := embedded.Config{
		Metrics:           mx,
		Coordinator:       cc,
		Durable:           true,
		Store:             sc,
		Workers:           *localWorkers,
		Slots:             *slots,
		Models:            runner.ModelOpenerFunc(providers.Open),
		Harness:           runner.HarnessConfig{Sandbox: sb},
		MCP:               pool,
		HeartbeatInterval: cc.HeartbeatInterval,
		AllowScripted:     *scripted,
		Logger:            logger,
	}
	if len(client.URLs) == 0 && (client.Token != "" || client.User != "" || client.Creds != "" || client.NKeySeedFile != "") {
		return errors.New("--nats-token, --nats-user, --nats-creds and --nats-nkey configure the connection to an external NATS (--nats); the embedded server trusts the credentials of `coordinator creds`")
	}
	if len(client.URLs) > 0 {
		client.Logger = logger
		cfg.Connect = func(name string) (*nats.Conn, error) {
			c := client
			c.Name = name
			return broker.Connect(ctx, c)
		}
	} else {
		if err := secureServer(&server, &cfg, *insecure, *tlsCert, *tlsKey, *tlsCA, logger); err != nil {
			return err
		}
		server.Logger = logger
		cfg.Server = server
	}
	stack, err := embedded.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer stack.Stop()
	if stack.Server != nil && stack.Server.ClientURL() != "" {
		logger.Info("nats listening", "url", stack.Server.ClientURL())
	}
	if hc.Addr != "off" {
		nc, err := stack.Connect("formica-api")
		if err != nil {
			return err
		}
		coord := stack.Coordinator
		svc, err := service.New(service.Config{Conn: nc, Store: stack.Store, DefaultModel: *model, Cwd: *cwd, Ceilings: cc.Ceilings,
			LiveWorkers: func() int { return len(coord.Workers()) }, NeedWorker: *localWorkers == 0})
		if err != nil {
			return err
		}
		defer svc.Close()
		hc.Logger, hc.Metrics, hc.TraceURL = logger, mx, *traceURL
		srv, err := api.New(hc, svc)
		if err != nil {
			return err
		}
		if err := srv.Start(); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
		logger.Info("http api listening", "addr", srv.Addr())
	}
	logger.Info("coordinator ready", "id", stack.Coordinator.ID(), "local_workers", *localWorkers)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}
