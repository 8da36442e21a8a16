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
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/logging"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/pricing"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/submission"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// runFlags are the flags of `formica run`.
type runFlags struct {
	agentFile  string
	model      string
	envModel   string // --model from $FORMICA_MODEL: below the spec's model
	maxDepth   int
	maxThreads int
	cwd        string
	approve    string
	timeout    time.Duration
	json       bool
	noTTY      bool
	nats       broker.ClientConfig
	budget     budgetFlags
	mcpConfig  string
	providers  string
	endpoints  *providers.Endpoints
	pricesFile string
	prices     *pricing.Table
	traceURL   string
	logLevel   string
	logFormat  string
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.agentFile, "agent", "", "agent spec `file` (YAML or JSON); default: the built-in general agent")
	fs.StringVar(&f.model, "model", "", "model `ref` for the root agent, overriding the spec's (openai:<model>, anthropic:<model>, sim, scripted:<file>); default $FORMICA_MODEL")
	fs.IntVar(&f.maxDepth, "agent-max-depth", limits.DefaultMaxDepth, "deepest helper allowed (root is 0)")
	fs.IntVar(&f.maxThreads, "agent-max-threads", limits.DefaultMaxThreads, "live helpers allowed at once (root not counted)")
	fs.StringVar(&f.cwd, "cwd", "", "`dir` the harness tools act in (default: current directory; with --nats: one inside the coordinator's --cwd, default that)")
	fs.StringVar(&f.approve, "approve", "ask", "how tool calls needing approval are answered: ask (prompt on a terminal, deny without one), allow, deny")
	fs.DurationVar(&f.timeout, "timeout", 0, "the run's deadline once it starts: past it the run fails with \"deadline exceeded\" (0: no limit)")
	fs.BoolVar(&f.json, "json", false, "print only the run record as JSON on stdout")
	fs.StringVar(&f.mcpConfig, "mcp-config", "", mcp.FlagUsage+" (for the embedded run; with --nats, the workers' own)")
	fs.StringVar(&f.providers, "providers", "", providers.FlagUsage+" (for the embedded run; with --nats, the workers' own)")
	fs.StringVar(&f.pricesFile, "prices", "", pricing.FlagUsage+" (for the embedded run; with --nats, the workers' own)")
	fs.BoolVar(&f.noTTY, "no-tty", false, "print the tree as log lines even on a terminal")
	f.nats.RegisterFlags(fs)
	f.budget.register(fs)
	registerTraceURL(fs, &f.traceURL)
	fs.StringVar(&f.logLevel, "log-level", "off", "log level of the in-process coordinator and worker (without --nats): off, debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log line format on stderr: text or json")
}

func runCommand(args []string, stdio Stdio) int {
	fs := newFlagSet("formica run", stdio)
	var f runFlags
	f.register(fs)
	positional, code, ok := parseFlags(fs, args, stdio, func() {
		fmt.Fprintln(stdio.Err, "Usage: formica run [flags] TASK   (TASK '-' reads it from stdin)")
		fs.PrintDefaults()
	})
	if !ok {
		return code
	}
	f.fromEnvironment(fs)
	code, err := runOnce(f, positional, stdio)
	if err != nil {
		return report(stdio, "run", err)
	}
	return code
}

// fromEnvironment moves a --model that came from $FORMICA_MODEL, not the
// command line, below the spec's own model.
func (f *runFlags) fromEnvironment(fs *flag.FlagSet) {
	if !given(fs, "model") {
		f.envModel, f.model = f.model, ""
	}
}

func runOnce(f runFlags, positional []string, stdio Stdio) (int, error) {
	task, err := readTask(positional, stdio.In)
	if err != nil {
		return 0, err
	}
	if f.maxDepth < 0 || f.maxThreads < 1 {
		return 0, usagef("--agent-max-depth must be >= 0 and --agent-max-threads >= 1")
	}
	view := newTreeView(stdio.Err, isTerminal(stdio.Err) && !f.noTTY)
	approver, err := approverFor(f.approve, stdio, view)
	if err != nil {
		return 0, err
	}
	file := spec.Default()
	if f.agentFile != "" {
		loaded, err := spec.Load(f.agentFile)
		if err != nil {
			return 0, usageError{err}
		}
		file = *loaded
	}
	root := file.Agent
	modelRef := chooseModel(f.model, root.Model, f.envModel, stdio.Err)
	if f.model != "" {
		root.Model = f.model
	}
	// Agents without a model get the run's, so helpers inheriting it run
	// anywhere without configuration of their own.
	agents := file.Catalog()
	root.Model = cmp.Or(root.Model, modelRef)
	for name, a := range agents {
		a.Model = cmp.Or(a.Model, modelRef)
		agents[name] = a
	}
	// The directory the run's harness.cwd is taken relative to; the
	// coordinator places it (inside its own --cwd). On a cluster it is on
	// the workers: the coordinator's --cwd unless --cwd names one there.
	// Here it is this machine's, and must exist.
	var cwd string
	switch {
	case len(f.nats.URLs) == 0:
		if cwd, err = filepath.Abs(cmp.Or(f.cwd, ".")); err != nil {
			return 0, usageError{err}
		}
		dir, err := thread.ResolveCwd(cwd, root.Harness.Cwd)
		if err != nil {
			return 0, usageError{err}
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return 0, usagef("--cwd %s is not a directory", dir)
		}
	case f.cwd != "":
		if cwd, err = filepath.Abs(f.cwd); err != nil {
			return 0, usageError{err}
		}
	}

	sub := wire.RunSubmit{
		RunID:  uuid.NewString(),
		Task:   task,
		Agent:  root,
		Agents: agents,
		Limits: limits.Config{MaxDepth: f.maxDepth, MaxThreads: f.maxThreads},
		Budget: root.Budget.Override(f.budget.b),
		// The coordinator keeps the deadline, as it does a submitted run's:
		// the run ends the same, and says so in the same words, locally and
		// on a cluster.
		Timeout: f.timeout,
		Cwd:     cwd,
	}
	var opt submission.Options
	if len(f.nats.URLs) == 0 {
		// The models are called from this process, over its providers file.
		if f.endpoints, err = providers.LoadFile(f.providers); err != nil {
			return 0, usageError{err}
		}
		opt.Models = &providers.Opener{Endpoints: f.endpoints}
		if f.prices, err = pricing.Load(f.pricesFile); err != nil {
			return 0, usageError{err}
		}
	} else if f.providers != "" {
		return 0, usagef("--providers configures the embedded run; with --nats, give it to the workers")
	} else if f.pricesFile != "" {
		return 0, usagef("--prices configures the embedded run; with --nats, give it to the workers")
	}
	if err := submission.Check(sub, opt); err != nil {
		return 0, err
	}

	ctx, stop := signalContext()
	defer stop()
	nc, st, cleanup, err := connect(ctx, f, stdio.Err)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	var off natstransport.Offloader
	if st != nil {
		off = st
		noWorkerNotice(ctx, nc, st, stdio.Err)
	}
	cl, err := oneshot.New(nc, off)
	if err != nil {
		return 0, err
	}
	defer cl.Close()

	if len(f.nats.URLs) > 0 {
		announceRun(stdio.Err, sub.RunID)
	}
	view.start()
	sink := event.SinkFunc(func(e event.Event) { view.send(0, e) })
	run, err := cl.Run(ctx, sub, sink, approver)
	if err != nil {
		view.stop()
		return 0, err
	}
	view.finish(run)
	run.TraceURL = tracing.URL(f.traceURL, run.TraceID)
	if f.json {
		if err := printJSON(stdio.Out, run.Shown()); err != nil {
			return 0, err
		}
	} else if run.Status == event.Succeeded {
		fmt.Fprintln(stdio.Out, run.Output)
	}
	if run.TraceURL != "" && !f.json {
		fmt.Fprintf(stdio.Err, "formica: trace %s\n", run.TraceURL)
	}
	if run.Status != event.Succeeded {
		fmt.Fprintf(stdio.Err, "formica: run %s: %s\n", run.Status, printable(oneLine(run.Error, 2000)))
		return ExitFailed, nil
	}
	return ExitOK, nil
}

// connect reaches the cluster named by --nats or, without it, starts an
// embedded one in this process: NATS, a coordinator and a local worker with
// room for the root and every helper the limits allow.
func connect(ctx context.Context, f runFlags, stderr io.Writer) (*nats.Conn, *store.Store, func(), error) {
	if len(f.nats.URLs) > 0 {
		if f.mcpConfig != "" {
			return nil, nil, nil, usagef("--mcp-config configures the embedded run's worker; with --nats, give it to the workers")
		}
		f.nats.Name = "formica-cli"
		if err := withCreds(&f.nats); err != nil {
			return nil, nil, nil, err
		}
		nc, err := broker.Connect(ctx, f.nats)
		if err != nil {
			return nil, nil, nil, refused(err)
		}
		cleanup := func() { broker.Drain(nc, 5*time.Second) }
		// The cluster's object store carries records too large for one
		// message; without JetStream, large results cannot come back.
		st, _ := store.Open(ctx, nc, store.Config{Client: true})
		return nc, st, cleanup, nil
	}
	var logger *slog.Logger // nil: no logs
	if f.logLevel != "off" {
		l, err := logging.New(stderr, f.logLevel, f.logFormat)
		if err != nil {
			return nil, nil, nil, usageError{err}
		}
		logger = l
	}
	// A person's own run on their own machine may replay a scripted model.
	sb := localSandbox(stderr)
	pool, err := mcp.Open(f.mcpConfig, sb, nil)
	if err != nil {
		sb.Close()
		return nil, nil, nil, err
	}
	var stack *embedded.Stack
	cleanup := func() {
		if stack != nil {
			stack.Stop()
		}
		if pool != nil {
			pool.Close()
		}
		sb.Close()
	}
	// Its server has no listener, but its components still connect with
	// their own roles' credentials, made in memory.
	authority, err := auth.NewEphemeral()
	if err == nil {
		stack, err = embedded.Start(ctx, embedded.Config{
			Authority: authority,
			Workers:   1,
			Slots:     f.maxThreads + 1,
			Models:    &providers.Opener{Endpoints: f.endpoints, Logger: logger},
			Prices:    f.prices,
			// A person's own run acts where its --cwd and spec say, anywhere.
			Coordinator:   coordinator.Config{AllowScripted: true, Cwd: string(filepath.Separator)},
			AllowScripted: true,
			Harness:       runner.HarnessConfig{Sandbox: sb},
			MCP:           pool,
			Logger:        logger,
		})
	}
	var nc *nats.Conn
	if err == nil {
		nc, err = stack.ConnectAs(auth.Client, "formica-cli", "formica-cli")
	}
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return nc, nil, cleanup, nil
}

// localSandbox is the sandbox of an embedded run's tool calls. A person's
// own machine that cannot sandbox (not root, not Linux) is told so, and the
// run goes on unconfined.
func localSandbox(stderr io.Writer) *sandbox.Sandbox {
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "formica: tool calls run without a sandbox: %v\n", err)
		return nil
	}
	return sb
}

func readTask(positional []string, in io.Reader) (string, error) {
	if len(positional) == 0 {
		return "", usagef("no task given (formica run [flags] TASK)")
	}
	task := strings.Join(positional, " ")
	if task == "-" {
		b, err := io.ReadAll(io.LimitReader(in, 16<<20))
		if err != nil {
			return "", fmt.Errorf("read task from stdin: %w", err)
		}
		task = string(b)
	}
	if strings.TrimSpace(task) == "" {
		return "", usagef("the task is empty")
	}
	return task, nil
}

// chooseModel picks the root model: --model, else the spec's, else
// $FORMICA_MODEL, else the sim model with a notice saying how to set one.
func chooseModel(flagRef, specRef, envRef string, stderr io.Writer) string {
	if ref := cmp.Or(flagRef, specRef, envRef); ref != "" {
		return ref
	}
	fmt.Fprintln(stderr, "formica: no model configured, using the built-in sim model; set --model or FORMICA_MODEL (e.g. openai:gpt-4o with OPENAI_API_KEY)")
	return providers.Sim
}

func approverFor(mode string, stdio Stdio, view *treeView) (policy.Approver, error) {
	switch mode {
	case "allow":
		return policy.AllowAll, nil
	case "deny":
		return policy.DenyAll, nil
	case "ask":
		if isTerminal(stdio.In) && isTerminal(stdio.Err) {
			return newPromptApprover(stdio.In, stdio.Err, view), nil
		}
		return &unattended{view: view}, nil
	}
	return nil, usagef("--approve must be ask, allow or deny, not %q", mode)
}

// interrupted names what a signal did to the run.
func interrupted(s os.Signal) error {
	if s == os.Interrupt {
		return errors.New("interrupted (Ctrl-C)")
	}
	return fmt.Errorf("stopped by %v", s)
}

// unattended answers `ask` calls when there is no terminal to ask on: it
// denies them, and says so on stderr, one line per call.
type unattended struct{ view *treeView }

func (u *unattended) Approve(_ context.Context, req policy.ApprovalRequest) (policy.Approval, error) {
	line := fmt.Sprintf("formica: approval needed for %s: denied (no terminal; use --approve allow|deny)", printable(req.Tool))
	u.view.notice(line)
	return policy.Approval{Reason: "no terminal to ask on; use --approve allow to allow"}, nil
}

// noWorkerNotice says, in one line, when the cluster has no worker: the
// run then waits for one instead of starting.
func noWorkerNotice(ctx context.Context, nc *nats.Conn, st *store.Store, w io.Writer) {
	svc, err := service.New(service.Config{Conn: nc, Store: st})
	if err != nil {
		return
	}
	defer svc.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if ws, err := svc.Workers(ctx); err == nil && len(ws) == 0 {
		fmt.Fprintln(w, "formica: no worker is registered: the run waits for one (start one with: worker --nats URL)")
	}
}

// signalContext is cancelled by the first SIGINT or SIGTERM (the run then ends
// as cancelled); a second signal exits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(interrupted(s))
		case <-done:
			return
		}
		select {
		case <-sigs:
			os.Exit(ExitFailed)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}
