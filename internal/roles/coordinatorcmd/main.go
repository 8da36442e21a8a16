// Package coordinatorcmd is the coordinator command, run by cmd/coordinator
// and by the formica binary under the name coordinator: Formica's control
// plane, by default with an embedded NATS server (JetStream on, stored under
// --data-dir), or on an external NATS cluster with --nats. It takes queued
// runs, keeps their records, and serves the HTTP API. With --local-workers
// it also hosts workers, so one process runs everything.
package coordinatorcmd

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
	"github.com/formica-run/formica/internal/dirlock"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/envflag"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/logging"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/roles/role"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tracing/export"
	"github.com/formica-run/formica/internal/version"
)

// Main runs the coordinator command with os.Args and exits on failure.
func Main() {
	if len(os.Args) > 1 && os.Args[1] == "creds" {
		if err := creds(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "coordinator creds:", err)
			os.Exit(1)
		}
		return
	}
	fs, o := newFlags()
	role.Main(fs, &o.Flags, func() error { return run(o) })
}

// options are the coordinator's settings, bound to its flags.
type options struct {
	role.Flags
	server         broker.ServerConfig
	cc             coordinator.Config
	sc             store.Config
	hc             api.Config
	tokenFile      string
	webhooks       webhookFlags
	connectTimeout time.Duration
	drainGrace     time.Duration
	localWorkers   int
	insecure       bool
	tlsCert        string
	tlsKey         string
	tlsCA          string
	scripted       bool
	slots          int
	maxToolCalls   int
	natsLogLevel   string
	traceURL       string
	model          string
	cwd            string
}

// newFlags registers every flag of the coordinator; each one can also be set
// from the environment (package envflag).
func newFlags() (*flag.FlagSet, *options) {
	o := &options{server: broker.ServerConfig{DataDir: "formica-data", JetStream: true}}
	fs := o.NewFlagSet("coordinator", `  coordinator [flags]               run the coordinator (and, by default, an embedded NATS server)
  coordinator creds [flags]         issue NATS credentials for a role (coordinator creds --help)
  coordinator healthcheck [--ready] probe a running coordinator's /healthz (or /readyz) on its --http, exit 0 if healthy
`, " (for --local-workers)")
	fs.IntVar(&o.localWorkers, "local-workers", 0, "workers to host in this process")
	fs.BoolVar(&o.insecure, "nats-insecure", false, "let NATS clients connect over TCP without credentials (loopback only; logs a warning)")
	fs.StringVar(&o.tlsCert, "nats-tls-cert", "", "certificate `file` (PEM) of the NATS listener; enables TLS")
	fs.StringVar(&o.tlsKey, "nats-tls-key", "", "private key `file` (PEM) of --nats-tls-cert")
	fs.StringVar(&o.tlsCA, "nats-tls-client-ca", "", "CA `file` (PEM): NATS clients must present a certificate it signed")
	fs.BoolVar(&o.scripted, "allow-scripted", false, "accept submitted runs naming scripted:<file> models (for tests: the file is a path on the workers)")
	fs.IntVar(&o.slots, "slots", 16, "threads each local worker runs at once")
	fs.IntVar(&o.maxToolCalls, "max-tool-calls", runner.DefaultMaxToolCalls, "tool calls of one model response that a local worker runs (agent calls included); the rest are answered with an error and run nothing")
	fs.StringVar(&o.natsLogLevel, "nats-log-level", "warn", "log level of the embedded NATS server (its lines also pass --log-level): debug, info, warn, error")
	fs.StringVar(&o.traceURL, "trace-url", "", "link `template` to a run's trace, {trace_id} replaced (e.g. http://jaeger:16686/trace/{trace_id}); the API's run records carry it as trace_url")
	fs.StringVar(&o.model, "model", "", "model `ref` for submitted agents that name none (default: sim)")
	fs.StringVar(&o.cwd, "cwd", "", "harness `dir` of submitted runs on the workers (default: this process's directory)")
	o.server.RegisterServerFlags(fs)
	fs.DurationVar(&o.connectTimeout, "connect-timeout", 0, "with --nats: give up when NATS cannot be reached for this long at start-up (0: keep trying)")
	fs.DurationVar(&o.drainGrace, "drain-grace", coordinator.DefaultDrainGrace, "on SIGTERM, how long running runs may finish before they go back to the queue for another coordinator")
	fs.StringVar(&o.cc.ID, "id", "", "coordinator id (one word); default: kept in --data-dir on the embedded server (random with --nats)")
	fs.DurationVar(&o.cc.HeartbeatInterval, "heartbeat", coordinator.DefaultHeartbeatInterval, "heartbeat and progress interval")
	fs.DurationVar(&o.cc.PlacementTimeout, "placement-timeout", coordinator.DefaultPlacementTimeout, "how long a thread may wait for a free worker slot")
	fs.IntVar(&o.cc.MaxAttempts, "max-attempts", coordinator.DefaultMaxAttempts, "placements of a thread whose worker is lost")
	fs.DurationVar(&o.cc.ApprovalTimeout, "approval-timeout", coordinator.DefaultApprovalTimeout, "how long an approval waits for an answer before it is denied")
	fs.IntVar(&o.cc.MaxWorkerSlots, "max-worker-slots", coordinator.DefaultMaxWorkerSlots, "cap on the slots one worker may announce")
	fs.IntVar(&o.cc.MaxRuns, "max-runs", coordinator.DefaultMaxRuns, "queued runs this coordinator runs at once (its run slots)")
	fs.DurationVar(&o.cc.RunIdle, "run-idle", coordinator.DefaultRunIdle, "a run none of whose threads reports anything for this long (a model that does not answer, an approval) gives its run slot to the next queued run; 0: runs keep their slots")
	fs.IntVar(&o.cc.MaxIdleRuns, "max-idle-runs", coordinator.DefaultMaxIdleRuns, "runs held beside the run slots, once idle (--run-idle); 0: none")
	fs.IntVar(&o.cc.Ceilings.MaxThreads, "max-agent-threads", limits.DefaultCeilingThreads, "ceiling on a submission's agent_max_threads")
	fs.IntVar(&o.cc.Ceilings.MaxDepth, "max-agent-depth", limits.DefaultCeilingDepth, "ceiling on a submission's agent_max_depth")
	fs.IntVar(&o.cc.Ceilings.MaxSpawns, "max-spawns", limits.DefaultCeilingSpawns, "helpers one run may ever start (caps budget.spawns)")
	fs.IntVar(&o.cc.Ceilings.MaxTaskBytes, "max-task-bytes", limits.DefaultCeilingTask, "ceiling on a submission's task, in bytes")
	fs.DurationVar(&o.cc.Ceilings.MaxRunTimeout, "max-run-timeout", limits.DefaultMaxRunTimeout, "ceiling on a submission's timeout")
	fs.DurationVar(&o.cc.RunTimeout, "run-timeout", coordinator.DefaultRunTimeout, "deadline of a queued run that asks none; past it the run fails (\"deadline exceeded\")")
	fs.DurationVar(&o.sc.Retention, "retention", store.DefaultRetention, "how long run records, held approvals and payload objects are kept after their last write")
	fs.DurationVar(&o.sc.EventsMaxAge, "events-max-age", store.DefaultEventsMaxAge, "how long run events are kept")
	fs.IntVar(&o.sc.Replicas, "replicas", store.DefaultReplicas, "JetStream replicas of the run store (3 on a NATS cluster)")
	fs.IntVar(&o.sc.MaxDeliver, "queue-max-deliver", store.DefaultMaxDeliver, "deliveries of a run before it is failed for good (its coordinator died each time)")
	fs.IntVar(&o.sc.JournalMaxThreadMsgs, "journal-max-thread-msgs", store.DefaultJournalMaxThreadMsgs, "messages one thread's journal may hold; writes past it are refused and the thread fails")
	fs.DurationVar(&o.sc.JournalMaxAge, "journal-max-age", 0, "how long thread journals (resume, transcripts) are kept; 0: 7 days, or --retention if shorter; at most --retention")
	fs.DurationVar(&o.sc.AckWait, "queue-ack-wait", store.DefaultAckWait, "how long a run stays claimed by a coordinator that neither renews its lease nor is taken over (every coordinator gone)")
	fs.DurationVar(&o.cc.LeaseTTL, "lease-ttl", coordinator.DefaultLeaseTTL, "how long a running run's lease may go unrenewed (its coordinator dead or frozen) before another coordinator takes the run over")
	fs.StringVar(&o.hc.Addr, "http", "127.0.0.1:8080", "HTTP API `addr`; \"off\" disables it")
	fs.StringVar(&o.hc.Token, "http-token", "", "bearer `token` the HTTP API requires; required beyond loopback")
	fs.StringVar(&o.tokenFile, "http-token-file", "", "`file` holding the HTTP API's bearer token (instead of --http-token)")
	fs.IntVar(&o.hc.MaxStreams, "http-max-streams", api.DefaultMaxStreams, "event streams (SSE: GET /v1/runs/{id}/events, the dashboard's live views) the HTTP API serves at once; past it new ones get 503 with Retry-After")
	fs.Func("http-cors-origins", "web `origins` (scheme://host[:port], comma-separated) whose pages may call the HTTP API from a browser (CORS); none by default", commaList(&o.hc.CORSOrigins))
	o.webhooks.register(fs)
	return fs, o
}

func run(o *options) error {
	token, err := envflag.Secret(o.hc.Token, o.tokenFile, "--http-token", "--http-token-file")
	if err != nil {
		return err
	}
	o.hc.Token = token
	if o.cc.Webhooks, err = o.webhooks.config(); err != nil {
		return err
	}
	logger, err := logging.New(os.Stderr, o.LogLevel, o.LogFormat)
	if err != nil {
		return err
	}
	natsLevel, err := logging.ParseLevel(o.natsLogLevel)
	if err != nil {
		return fmt.Errorf("--nats-log-level: %w", err)
	}
	// Refuse a bad --http before anything starts: not even one queued run
	// may be taken by a coordinator that is about to exit.
	hc := o.hc
	if hc.Addr != "off" {
		if err := api.Check(hc); err != nil {
			if errors.Is(err, api.ErrInsecure) {
				err = fmt.Errorf("--http: %w (give one with --http-token, --http-token-file or $FORMICA_HTTP_TOKEN)", err)
			}
			return err
		}
	}
	var sb *sandbox.Sandbox
	if o.localWorkers > 0 {
		if sb, err = o.Sandbox.Open(); err != nil {
			return err
		}
		if sb == nil {
			logger.Warn("sandbox off: the local workers' tool calls run unconfined")
		} else {
			defer sb.Close()
		}
	}
	var pool *mcp.Pool
	if o.MCPFile != "" {
		if o.localWorkers == 0 {
			return errors.New("--mcp-config configures the MCP servers of --local-workers; give --local-workers too (or give it to each worker)")
		}
		if pool, err = mcp.Open(o.MCPFile, sb, logger); err != nil {
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

	models, prices := o.Models(logger)
	cc := o.cc
	if cc.RunIdle <= 0 {
		cc.RunIdle = -1 // the flag's 0: never given back
	}
	if cc.MaxIdleRuns <= 0 {
		cc.MaxIdleRuns = -1
	}
	cc.Cwd, cc.AllowScripted = o.cwd, o.scripted
	// The metrics cover the coordinator, and its local workers when it
	// hosts some.
	roles := metrics.Coordinator
	if o.localWorkers > 0 {
		roles = metrics.All
	}
	mx := metrics.New(roles)
	cfg := embedded.Config{
		Metrics:           mx,
		Coordinator:       cc,
		Durable:           true,
		Store:             o.sc,
		Workers:           o.localWorkers,
		Slots:             o.slots,
		MaxToolCalls:      o.maxToolCalls,
		Models:            models,
		Prices:            prices,
		Harness:           runner.HarnessConfig{Sandbox: sb},
		MCP:               pool,
		HeartbeatInterval: cc.HeartbeatInterval,
		AllowScripted:     o.scripted,
		Logger:            logger,
	}
	if c := o.Client; len(c.URLs) == 0 && (c.Token != "" || c.User != "" || c.Creds != "" || c.NKeySeedFile != "") {
		return errors.New("--nats-token, --nats-user, --nats-creds and --nats-nkey configure the connection to an external NATS (--nats); the embedded server trusts the credentials of `coordinator creds`")
	}
	if len(o.Client.URLs) > 0 {
		cfg.Connect = func(name string) (*nats.Conn, error) {
			c := o.Client
			c.Name, c.Logger = name, logger
			return broker.ConnectRetry(ctx, c, o.connectTimeout)
		}
	} else {
		// One JetStream store, one process: a second coordinator on the
		// same directory would run runs the first cannot see and corrupt
		// the store.
		lock, err := dirlock.Acquire(o.server.DataDir)
		if err != nil {
			return err
		}
		defer lock.Release()
		if cfg.WorkerIDs, err = localWorkerIDs(o.server.DataDir, o.localWorkers); err != nil {
			return err
		}
		if cfg.Coordinator.ID == "" {
			if cfg.Coordinator.ID, err = coordinatorID(o.server.DataDir); err != nil {
				return err
			}
		}
		server := o.server
		if err := secureServer(&server, &cfg, o.insecure, o.tlsCert, o.tlsKey, o.tlsCA, logger); err != nil {
			return err
		}
		server.Logger = logging.Floor(logger, natsLevel)
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
		svc, err := service.New(service.Config{Conn: nc, Store: stack.Store, DefaultModel: o.model, Cwd: o.cwd, Ceilings: cc.Ceilings,
			LiveWorkers: func() int { return len(coord.Workers()) }, NeedWorker: o.localWorkers == 0})
		if err != nil {
			return err
		}
		defer svc.Close()
		hc.Logger, hc.Metrics, hc.TraceURL = logger, mx, o.traceURL
		srv, err := api.New(hc, drainAware{svc, stack.Coordinator})
		if err != nil {
			return err
		}
		if err := srv.Start(); err != nil {
			return err
		}
		defer role.Shutdown(srv)
		logger.Info("http api listening", "addr", srv.Addr())
	}
	logger.Info("coordinator ready", "id", stack.Coordinator.ID(), "local_workers", o.localWorkers, "version", version.Version())
	<-ctx.Done()
	stop() // a second signal ends the process at once
	logger.Info("shutting down: draining", "grace", o.drainGrace)
	if err := stack.Drain(o.drainGrace); err != nil {
		logger.Warn("drain", "err", err)
	}
	logger.Info("stopped")
	return nil
}

// drainAware is the API's backend, not ready while the coordinator drains,
// so load balancers and orchestrators stop sending it requests.
type drainAware struct {
	*service.Service
	coord *coordinator.Coordinator
}

func (d drainAware) Ready(ctx context.Context) error {
	if d.coord.Draining() {
		return fmt.Errorf("%w: coordinator draining", api.ErrUnavailable)
	}
	return d.Service.Ready(ctx)
}
