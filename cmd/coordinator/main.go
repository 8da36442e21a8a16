// Command coordinator runs Formica's control plane: by default with an
// embedded NATS server (JetStream on, stored under --data-dir), or on an
// external NATS cluster with --nats. With --local-workers it also hosts
// workers, so one process runs everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/logging"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
)

func main() {
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
		localWorkers = fs.Int("local-workers", 0, "workers to host in this process")
		slots        = fs.Int("slots", 16, "threads each local worker runs at once")
		logLevel     = fs.String("log-level", "info", "log level: debug, info, warn, error")
	)
	server.RegisterServerFlags(fs)
	client.RegisterFlags(fs)
	fs.StringVar(&cc.ID, "id", "", "coordinator id (one word); default random")
	fs.DurationVar(&cc.HeartbeatInterval, "heartbeat", coordinator.DefaultHeartbeatInterval, "heartbeat and progress interval")
	fs.DurationVar(&cc.PlacementTimeout, "placement-timeout", coordinator.DefaultPlacementTimeout, "how long a thread may wait for a free worker slot")
	fs.IntVar(&cc.MaxAttempts, "max-attempts", coordinator.DefaultMaxAttempts, "placements of a thread whose worker is lost")
	fs.DurationVar(&cc.ApprovalTimeout, "approval-timeout", coordinator.DefaultApprovalTimeout, "how long an approval waits for an answer before it is denied")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		os.Exit(2)
	}
	logger, err := logging.New(os.Stderr, *logLevel)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := embedded.Config{
		Coordinator:       cc,
		Workers:           *localWorkers,
		Slots:             *slots,
		Models:            runner.ModelOpenerFunc(providers.Open),
		HeartbeatInterval: cc.HeartbeatInterval,
		Logger:            logger,
	}
	if len(client.URLs) > 0 {
		client.Logger = logger
		cfg.Connect = func(name string) (*nats.Conn, error) {
			c := client
			c.Name = name
			return broker.Connect(ctx, c)
		}
	} else {
		server.Logger = logger
		cfg.Server = server
	}
	stack, err := embedded.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if stack.Server != nil && stack.Server.ClientURL() != "" {
		logger.Info("nats listening", "url", stack.Server.ClientURL())
	}
	logger.Info("coordinator ready", "id", stack.Coordinator.ID(), "local_workers", *localWorkers)
	<-ctx.Done()
	logger.Info("shutting down")
	done := make(chan error, 1)
	go func() { done <- stack.Stop() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("shutdown did not finish in 30s")
	}
}
