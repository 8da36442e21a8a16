package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/formica-run/formica/client"
	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/envflag"
	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tracing"
)

// clusterFlags are the connection flags of every command that talks to a
// running cluster: over NATS (--nats, $FORMICA_NATS or $NATS_URL) or
// through a coordinator's HTTP API (--api, $FORMICA_API).
type clusterFlags struct {
	nats           broker.ClientConfig
	api            string
	token          string
	tokenFile      string
	connectTimeout time.Duration
	json           bool
	traceURL       string
	fs             *flag.FlagSet // to tell flags given from variables
}

// defaultConnectTimeout is how long a cluster command waits for NATS: long
// enough to ride out a restarting server, short enough for a person.
const defaultConnectTimeout = 15 * time.Second

func (f *clusterFlags) register(fs *flag.FlagSet, withJSON bool) {
	f.fs = fs
	f.nats.RegisterFlags(fs)
	fs.StringVar(&f.api, "api", "", "coordinator HTTP API `URL`, instead of --nats (http://host:8080)")
	fs.StringVar(&f.token, "token", "", "bearer `token` of the HTTP API (its --http-token)")
	fs.StringVar(&f.tokenFile, "token-file", "", "`file` holding the HTTP API's bearer token (instead of --token)")
	registerTraceURL(fs, &f.traceURL)
	fs.DurationVar(&f.connectTimeout, "connect-timeout", defaultConnectTimeout, "how long to keep trying to reach NATS (0: no limit)")
	if withJSON {
		fs.BoolVar(&f.json, "json", false, "print JSON")
	}
}

// cluster is an open connection to a cluster.
type cluster struct {
	ops      clusterOps
	traceURL string // --trace-url
}

// link fills in r's trace link from --trace-url (a coordinator's own
// stays without it), and its totals.
func (c *cluster) link(r record.Run) record.Run {
	if c.traceURL != "" {
		r.TraceURL = tracing.URL(c.traceURL, r.TraceID)
	}
	return r.Shown()
}

// registerTraceURL adds --trace-url ($FORMICA_TRACE_URL, as every flag).
func registerTraceURL(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "trace-url", "", "link `template` to a run's trace, {trace_id} replaced (e.g. http://jaeger:16686/trace/{trace_id})")
}

// connect reaches the cluster through the HTTP API or over NATS, as the
// flags say (clusterFlags.useAPI).
func (f *clusterFlags) connect(ctx context.Context, stderr io.Writer) (*cluster, error) {
	useAPI, err := f.useAPI()
	if err != nil {
		return nil, err
	}
	var ops clusterOps
	if useAPI {
		ops, err = f.dialAPI()
	} else {
		ops, err = f.dialNATS(ctx, stderr)
	}
	if err != nil {
		return nil, err
	}
	return &cluster{ops: ops, traceURL: f.traceURL}, nil
}

// useAPI chooses the transport: the one given. Given both, a flag on the
// command line wins over the other's variable; both on the command line,
// or both from variables, is a usage error.
func (f *clusterFlags) useAPI() (bool, error) {
	viaNATS, viaAPI := len(f.nats.URLs) > 0, f.api != ""
	switch {
	case !viaNATS && !viaAPI:
		return false, usagef("no cluster given: use --nats URL or --api URL, or set FORMICA_NATS (or NATS_URL) or FORMICA_API")
	case viaNATS && viaAPI && given(f.fs, "api") != given(f.fs, "nats"):
		viaAPI = given(f.fs, "api")
	case viaNATS && viaAPI:
		return false, usagef("give %s or %s, not both", f.source("nats"), f.source("api"))
	}
	if !viaAPI && (given(f.fs, "token") || given(f.fs, "token-file")) {
		return false, usagef("--token and --token-file are for --api; NATS takes --nats-creds, --nats-token, ...")
	}
	return viaAPI, nil
}

// given reports whether flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

// source names where flag name's value came from: the flag, or the
// variable that set it.
func (f *clusterFlags) source(name string) string {
	if !given(f.fs, name) {
		for _, v := range envflag.Vars(name) {
			if _, ok := os.LookupEnv(v); ok {
				return "$" + v
			}
		}
	}
	return "--" + name
}

// dialAPI makes a client of the HTTP API; nothing is sent until a command
// asks.
func (f *clusterFlags) dialAPI() (clusterOps, error) {
	token, err := envflag.Secret(f.token, f.tokenFile, f.source("token"), f.source("token-file"))
	if err != nil {
		return nil, usageError{err}
	}
	if _, err := client.New(f.api, ""); err != nil {
		return nil, usagef("%s: %w", f.source("api"), err)
	}
	c, err := client.New(f.api, token)
	if err != nil {
		return nil, usagef("%s: %w", f.source("token"), err)
	}
	return apiOps{c}, nil
}

// dialNATS reaches the cluster over NATS, retrying until
// --connect-timeout (a refusal of the credentials ends it at once); waits
// and connection trouble are logged to stderr.
func (f *clusterFlags) dialNATS(ctx context.Context, stderr io.Writer) (clusterOps, error) {
	f.nats.Name = "formica-cli"
	f.nats.StopOnRefusal = true
	if err := withCreds(&f.nats); err != nil {
		return nil, err
	}
	f.nats.Logger = cmp.Or(f.nats.Logger, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
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
	return &natsOps{Service: svc, nc: nc, st: st}, nil
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
	ctx, stop := signalContext()
	defer stop()
	// Submitted runs get the coordinator's --cwd: this directory means
	// nothing on the workers.
	c, err := f.connect(ctx, stdio.Err)
	if err == nil {
		defer c.ops.Close()
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
