// Package cli is the formica command line: argument parsing, the commands, and
// how a run is shown on a terminal.
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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/term"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/envflag"
	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/submission"
	"github.com/formica-run/formica/internal/tracing/export"
	"github.com/formica-run/formica/internal/version"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1 // the run failed or was cancelled
	ExitUsage  = 2 // bad flags or arguments
)

// Stdio are the streams a command uses.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

const usage = `Usage: formica <command> [flags] [arguments]

Commands:
  run TASK           run a task with an agent and its helpers, print the final output
  submit TASK        queue a run on a cluster and print its id (--wait to follow it)
  get ID             show a run's record
  runs               list runs
  watch ID           follow a run's tree (replays what already happened)
  cancel ID          cancel a run and its whole tree
  resume ID          run a failed or cancelled run again, reusing its finished work
  transcript ID [T]  show a thread's conversation (the root's, or thread id / path T)
  approvals          list tool calls waiting for approval
  approve ID         answer one (--allow or --deny)
  workers            list live workers
  assets             count the cluster's JetStream streams and consumers by kind
  bench              measure the spawn path against raw NATS (--quick, --json FILE)
  version            print the version (also --version)
  completion SHELL   print a completion script for bash, zsh or fish

Cluster commands find the cluster with --nats URL, $FORMICA_NATS or $NATS_URL,
or a coordinator's HTTP API with --api URL ($FORMICA_API) and --token
($FORMICA_TOKEN).
Every flag can also be set as $FORMICA_<FLAG> (--agent-max-depth:
$FORMICA_AGENT_MAX_DEPTH); a flag on the command line wins.

Run 'formica <command> -h' for a command's flags.
`

// commands are the subcommands by name.
var commands = map[string]func(args []string, stdio Stdio) int{
	"run":        runCommand,
	"submit":     submitCommand,
	"get":        getCommand,
	"runs":       runsCommand,
	"watch":      watchCommand,
	"cancel":     cancelCommand,
	"resume":     resumeCommand,
	"transcript": transcriptCommand,
	"approvals":  approvalsCommand,
	"approve":    approveCommand,
	"workers":    workersCommand,
	"assets":     assetsCommand,
	"bench":      benchCommand,
}

// Main runs the command line and returns the process exit code. Spans go
// where the OTEL_* environment says (nowhere without it), flushed before
// it returns.
func Main(args []string, stdio Stdio) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Err, usage)
		return ExitUsage
	}
	logger := slog.New(slog.NewTextHandler(stdio.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stopTracing, err := export.Start(context.Background(), "formica", logger)
	if err != nil {
		fmt.Fprintln(stdio.Err, "formica:", err)
		return ExitUsage
	}
	defer stopTracing()
	return command(args, stdio)
}

func command(args []string, stdio Stdio) int {
	if cmd, ok := commands[args[0]]; ok {
		return cmd(args[1:], stdio)
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdio.Out, usage)
		return ExitOK
	case "-version", "--version", "version":
		fmt.Fprintln(stdio.Out, version.String("formica"))
		return ExitOK
	case "completion":
		return completionCommandMain(args[1:], stdio)
	}
	fmt.Fprintf(stdio.Err, "formica: unknown command %q (see 'formica help')\n", args[0])
	return ExitUsage
}

// parseFlags parses a command's flags. A bad flag is one line on stderr
// (the flag package's own text) and ExitUsage; -h prints the usage and
// ExitOK. ok is false when the command should return code.
func parseFlags(fs *flag.FlagSet, args []string, stdio Stdio, usage func()) (positional []string, code int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	positional, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdio.Err)
		usage()
		return nil, ExitOK, false
	case err != nil:
		fmt.Fprintf(stdio.Err, "formica: %s: %v (see '%s -h')\n", strings.TrimPrefix(fs.Name(), "formica "), err, fs.Name())
		return nil, ExitUsage, false
	}
	return positional, 0, true
}

// report prints a command's error once, as "formica: <command>: <why>",
// and returns its exit code: ExitUsage for what the user asked wrongly
// (bad arguments, ids, models, tools, limits, filters), else ExitFailed.
func report(stdio Stdio, command string, err error) int {
	fmt.Fprintf(stdio.Err, "formica: %s: %v\n", command, err)
	if isUsage(err) {
		return ExitUsage
	}
	return ExitFailed
}

// flagSetMade, when set (by tests), sees every command's flag set once its
// flags are registered.
var flagSetMade atomic.Pointer[func(*flag.FlagSet)]

// newFlagSet is the flag set of one command; its output is the command's
// stderr. Every command makes its set here and parses it with parse or
// parseInterspersed, so all its flags can come from the environment.
func newFlagSet(name string, stdio Stdio) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	return fs
}

// parse parses a command's flags (flags first, as flag.Parse), then fills
// the rest from the environment.
func parse(fs *flag.FlagSet, args []string) error {
	if hook := flagSetMade.Load(); hook != nil {
		(*hook)(fs)
	}
	return envflag.Parse(fs, args)
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("formica run TASK --json"), as users type them. An argument that
// starts with '-' but holds white space before any '=' ("- a\n- b", a task
// written as a list) is a positional argument, not a flag.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	if hook := flagSetMade.Load(); hook != nil {
		(*hook)(fs)
	}
	var positional []string
	err := envflag.ParseWith(fs, func() (err error) {
		positional, err = parseMixed(fs, args)
		return err
	})
	return positional, err
}

// parseMixed is parseInterspersed without the environment.
func parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	const hold = "\x00positional:"
	held := map[string]string{}
	args = slices.Clone(args)
	for i, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(a, "-") && strings.ContainsAny(name, " \t\n") {
			args[i] = hold + strconv.Itoa(i)
			held[args[i]] = a
		}
	}
	unmask := func(a string) string { return cmp.Or(held[a], a) } // what is held starts with '-'
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			for _, a := range args[1:] {
				positional = append(positional, unmask(a))
			}
			return positional, nil
		}
		positional = append(positional, unmask(args[0]))
		args = args[1:]
	}
}

// usageError marks errors that should exit with ExitUsage.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u) || errors.Is(err, flag.ErrHelp) || errors.Is(err, api.ErrInvalid) ||
		errors.Is(err, submission.ErrInvalid) || errors.Is(err, ids.ErrInvalid) || errors.Is(err, store.ErrIDTaken)
}

// isTerminal reports whether f is an interactive terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
