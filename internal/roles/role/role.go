// Package role is what the coordinator and worker commands share: the flags
// both have, and how the process reads them (command line, then
// environment), answers --help, --version and `healthcheck`, and exits.
package role

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/envflag"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/ops"
	"github.com/formica-run/formica/internal/pricing"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/version"
)

// Flags are the flags of both roles.
type Flags struct {
	Client        broker.ClientConfig
	LogLevel      string
	LogFormat     string
	MCPFile       string
	ProvidersFile string
	PricesFile    string
	Sandbox       sandbox.Flags // of the workers
	Version       bool
	name          string // the command's, for messages
}

// NewFlagSet is the flag set of the command name (coordinator or worker),
// with f registered on it; its --help shows the command's forms (a line
// each) above the flags. forWorkers ends the usage of the flags naming files
// the workers read. Client's current fields are its flags' defaults.
func (f *Flags) NewFlagSet(name, forms, forWorkers string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage:\n"+forms+"\nFlags:\n")
		fs.PrintDefaults()
	}
	f.name = name
	fs.StringVar(&f.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.LogFormat, "log-format", "text", "log line format: text or json")
	fs.StringVar(&f.MCPFile, "mcp-config", "", mcp.FlagUsage+forWorkers)
	fs.StringVar(&f.ProvidersFile, "providers", "", providers.FlagUsage+forWorkers)
	fs.StringVar(&f.PricesFile, "prices", "", pricing.FlagUsage+forWorkers)
	f.Client.RegisterFlags(fs)
	f.Sandbox.Register(fs)
	fs.BoolVar(&f.Version, "version", false, "print the version and exit")
	return fs
}

// Main runs the command with os.Args and exits on failure. fs holds its
// flags, f among them (NewFlagSet). `NAME healthcheck` probes the
// process this machine's environment configures through its --http listener
// (ops.Healthcheck). Otherwise the arguments are flags: a bad one exits 2,
// --help and --version answer, and then run runs; its error is printed after
// "NAME:" and exits 1.
func Main(fs *flag.FlagSet, f *Flags, run func() error) {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		fs.SetOutput(io.Discard)
		if err := envflag.Parse(fs, nil); err != nil {
			fmt.Fprintln(os.Stderr, f.name+" healthcheck:", err)
			os.Exit(2)
		}
		os.Exit(ops.Healthcheck(f.name, fs.Lookup("http").Value.String(), os.Args[2:], os.Stdout, os.Stderr))
	}
	if err := envflag.Parse(fs, os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	if f.Version {
		fmt.Println(version.String(f.name))
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, f.name+":", err)
		os.Exit(1)
	}
}

// Models opens the models the workers call, as --providers configures, and
// reads the prices of their calls (--prices). A bad file ends the process
// (exit 2).
func (f *Flags) Models(logger *slog.Logger) (*providers.Opener, *pricing.Table) {
	endpoints, err := providers.LoadFile(f.ProvidersFile)
	var prices *pricing.Table
	if err == nil {
		prices, err = pricing.Load(f.PricesFile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, f.name+":", err)
		os.Exit(2)
	}
	return &providers.Opener{Endpoints: endpoints, Logger: logger}, prices
}

// Shutdown shuts the command's HTTP listener srv down, giving requests in
// flight five seconds.
func Shutdown(srv interface{ Shutdown(context.Context) error }) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}
