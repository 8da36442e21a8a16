package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tracing"
)

// clusterFlags are the connection flags of every command that talks to a
// running cluster; without --nats, $FORMICA_NATS or $NATS_URL names it.
type clusterFlags struct {
	nats           broker.ClientConfig
	connectTimeout time.Duration
	json           bool
	traceURL       string
}

// defaultConnectTimeout is how long a cluster command waits for NATS: long
// enough to ride out a restarting server, short enough for a person.
const defaultConnectTimeout = 15 * time.Second

func (f *clusterFlags) register(fs *flag.FlagSet, withJSON bool) {
	f.nats.RegisterFlags(fs)
	registerTraceURL(fs, &f.traceURL)
	fs.DurationVar(&f.connectTimeout, "connect-timeout", defaultConnectTimeout, "how long to keep trying to reach NATS (0: no limit)")
	if withJSON {
		fs.BoolVar(&f.json, "json", false, "print JSON")
	}
}

// cluster is an open connection to a cluster, its store and its service.
type cluster struct {
	nc       *nats.Conn
	st       *store.Store
	svc      *service.Service
	traceURL string // --trace-url
}

// link fills in r's trace link from --trace-url, and its totals.
func (c *cluster) link(r record.Run) record.Run {
	r.TraceURL = tracing.URL(c.traceURL, r.TraceID)
	return r.Shown()
}

// registerTraceURL adds --trace-url ($FORMICA_TRACE_URL, as every flag).
func registerTraceURL(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "trace-url", "", "link `template` to a run's trace, {trace_id} replaced (e.g. http://jaeger:16686/trace/{trace_id})")
}

// connect reaches the cluster, retrying until --connect-timeout (a refusal
// of the credentials ends it at once); waits and connection trouble are
// logged to stderr.
func (f *clusterFlags) connect(ctx context.Context, stderr io.Writer) (*cluster, error) {
	if len(f.nats.URLs) == 0 {
		return nil, usagef("no cluster given: use --nats URL or set FORMICA_NATS (or NATS_URL)")
	}
	f.nats.Name = "formica-cli"
	f.nats.StopOnRefusal = true
	if err := withCreds(&f.nats); err != nil {
		return nil, err
	}
	if f.nats.Logger == nil {
		f.nats.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	nc, err := broker.ConnectRetry(ctx, f.nats, f.connectTimeout)
	if err != nil {
		return nil, refused(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := store.Open(ctx, nc, store.Config{Client: true})
	if err != nil {
		nc.Close()
		return nil, err
	}
	svc, err := service.New(service.Config{Conn: nc, Store: st, DefaultModel: os.Getenv("FORMICA_MODEL")})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &cluster{nc: nc, st: st, svc: svc, traceURL: f.traceURL}, nil
}

func (c *cluster) close() {
	c.svc.Close()
	broker.Drain(c.nc, 5*time.Second)
}

// runCluster parses a command's flags, connects, and runs fn, mapping errors
// to exit codes.
func runCluster(name, usage string, args []string, stdio Stdio, withJSON bool,
	extra func(fs *flag.FlagSet), fn func(ctx context.Context, c *cluster, f *clusterFlags, args []string) (int, error)) int {
	fs := newFlagSet("formica "+name, stdio)
	var f clusterFlags
	f.register(fs, withJSON)
	if extra != nil {
		extra(fs)
	}
	positional, code, ok := parseFlags(fs, args, stdio, func() {
		stdio.Err.Write([]byte("Usage: formica " + name + " " + usage + "\n"))
		fs.PrintDefaults()
	})
	if !ok {
		return code
	}
	ctx, stop := signalContext(0)
	defer stop()
	// Submitted runs get the coordinator's --cwd: this directory means
	// nothing on the workers.
	c, err := f.connect(ctx, stdio.Err)
	if err == nil {
		defer c.close()
		var code int
		code, err = fn(ctx, c, &f, positional)
		if err == nil {
			return code
		}
	}
	return report(stdio, name, err)
}

// oneID returns the single positional argument, a run or approval id.
func oneID(args []string, what string) (string, error) {
	if len(args) != 1 || args[0] == "" {
		return "", usagef("give exactly one %s id", what)
	}
	if err := ids.Check(args[0]); err != nil {
		return "", usagef("%s %w", what, err)
	}
	return args[0], nil
}

// withCreds completes c for a credentials file (--nats-creds, else
// $FORMICA_NATS_CREDS): its reply inbox must be under the prefix the
// credentials allow.
func withCreds(c *broker.ClientConfig) error {
	if c.Creds == "" && c.NKeySeedFile == "" && c.Token == "" && c.User == "" {
		c.Creds = os.Getenv("FORMICA_NATS_CREDS")
	}
	if c.Creds == "" || c.InboxPrefix != "" {
		return nil
	}
	id, err := auth.CheckRole(c.Creds, "formica", auth.Client, auth.Coordinator)
	if err != nil {
		return err
	}
	c.InboxPrefix = auth.InboxPrefix(id.Role, id.ID)
	return nil
}

// refused adds to a server's refusal of the credentials how to get the
// right ones.
func refused(err error) error {
	var re *broker.RefusedError
	if errors.As(err, &re) {
		return fmt.Errorf("%w; %s", err, auth.Remedy(auth.Client))
	}
	return err
}
