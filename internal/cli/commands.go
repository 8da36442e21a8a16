package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/wire"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printList prints list as JSON with --json (an empty one as []), else as
// a table for people: header, then a row of tab-separated cells each.
func printList[T any](stdio Stdio, asJSON bool, list []T, header string, row func(T) string) (int, error) {
	if asJSON {
		if list == nil {
			list = []T{}
		}
		return ExitOK, printJSON(stdio.Out, list)
	}
	w := newTable(stdio.Out)
	fmt.Fprintln(w, header)
	for _, x := range list {
		fmt.Fprintln(w, row(x))
	}
	return ExitOK, w.Flush()
}

// newTable aligns the tab-separated cells written to it on w.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// exitFor maps a run's final status to the exit code.
func exitFor(s event.Status) int {
	if s == event.Succeeded {
		return ExitOK
	}
	return ExitFailed
}

func submitCommand(args []string, stdio Stdio) int {
	var (
		id, agentFile, model string
		wait, noTTY          bool
		maxDepth, maxThreads int
		budget               budgetFlags
		timeout              time.Duration
		webhooks             []string
	)
	return runCluster("submit", "[flags] TASK", args, stdio, true, func(fs *flag.FlagSet) {
		fs.StringVar(&id, "id", "", "run `id` (one word); submitting the same id twice gives one run")
		fs.StringVar(&agentFile, "agent", "", "agent spec `file`")
		fs.StringVar(&model, "model", "", "model `ref` for the root agent")
		fs.BoolVar(&wait, "wait", false, "stream the run's tree and print its output when it ends")
		fs.BoolVar(&noTTY, "no-tty", false, "with --wait, print the tree as log lines even on a terminal")
		fs.IntVar(&maxDepth, "agent-max-depth", limits.DefaultMaxDepth, "deepest helper allowed (root is 0)")
		fs.IntVar(&maxThreads, "agent-max-threads", limits.DefaultMaxThreads, "live helpers allowed at once")
		budget.register(fs)
		fs.DurationVar(&timeout, "timeout", 0, "the run's deadline once it starts (0: the coordinator's --run-timeout)")
		fs.Func("webhook", "`URL` to call, signed, when the run ends; may be repeated; must be under a coordinator's --webhook-allow", func(v string) error {
			webhooks = append(webhooks, v)
			return nil
		})
	}, func(ctx context.Context, c *cluster, f *clusterFlags, pos []string) (int, error) {
		task, err := readTask(pos, stdio.In)
		if err != nil {
			return 0, err
		}
		body := api.SubmitBody{Task: task, Model: model, ID: id, MaxDepth: maxDepth, MaxThreads: maxThreads,
			Budget: budget.body(), Webhooks: webhooks}
		if timeout != 0 {
			body.Timeout = timeout.String()
		}
		if agentFile != "" {
			// Checked here, so errors name the file; sent as its text.
			data, err := os.ReadFile(agentFile)
			if err != nil {
				return 0, usageError{fmt.Errorf("spec: %w", err)}
			}
			if _, err := spec.Parse(data, agentFile); err != nil {
				return 0, usageError{err}
			}
			if body.Agent, err = json.Marshal(string(data)); err != nil {
				return 0, err
			}
		}
		if !wait {
			id, err := c.ops.Submit(ctx, body)
			if err != nil {
				return 0, err
			}
			fmt.Fprintln(stdio.Out, id)
			return ExitOK, nil
		}
		if ws, err := c.ops.Workers(ctx); err == nil && len(ws) == 0 {
			fmt.Fprintln(stdio.Err, "formica: no worker is registered: the run waits for one (start one with: worker --nats URL)")
		}
		return followRun(ctx, c, stdio, f, 0, noTTY, func() (string, error) { return c.ops.Submit(ctx, body) })
	})
}

// followRun starts a run (start: its submission or resume, which returns
// its id), then draws its tree from its events after the event id after
// (the live tree on a terminal, log lines elsewhere or with noTTY) until
// its record is final, and prints its outcome. The run's id comes first,
// on stderr, so its transcript or a resume needs no `formica runs`.
func followRun(ctx context.Context, c *cluster, stdio Stdio, f *clusterFlags, after uint64, noTTY bool, start func() (string, error)) (int, error) {
	view := newTreeView(stdio.Err, isTerminal(stdio.Err) && !noTTY)
	id, err := start()
	if err != nil {
		return 0, err
	}
	announceRun(stdio.Err, id)
	view.start()
	// The events are replayed from after, so following after starting
	// misses none; the tree is complete once run.finished has come, which
	// can be after the record is final.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	follow := make(chan error, 1)
	go func() {
		follow <- c.ops.Events(fctx, id, after, view.send)
	}()
	final, err := waitFinal(ctx, c, id)
	if err != nil {
		view.stop()
		return 0, err
	}
	select {
	case <-follow:
	case <-time.After(followGrace):
		stopFollow()
		<-follow
	}
	view.finish(final)
	return printOutcome(stdio, final, f.json)
}

// announceRun says which run a command follows.
func announceRun(w io.Writer, id string) { fmt.Fprintf(w, "formica: run %s\n", id) }

// followGrace bounds how long a finished run's last events may trail its
// final record.
const followGrace = 10 * time.Second

// waitFinal waits for a run's record to be final.
func waitFinal(ctx context.Context, c *cluster, id string) (record.Run, error) {
	r, err := c.ops.WaitFinal(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return record.Run{}, fmt.Errorf("stopped waiting for run %s: %w", id, context.Cause(ctx))
		}
		return record.Run{}, err
	}
	return c.link(r), nil
}

func printOutcome(stdio Stdio, r record.Run, asJSON bool) (int, error) {
	if asJSON {
		return exitFor(r.Status), printJSON(stdio.Out, r)
	}
	if r.Status == event.Succeeded {
		fmt.Fprintln(stdio.Out, shown(stdio.Out, r.Output))
	} else {
		fmt.Fprintf(stdio.Err, "formica: run %s %s: %s\n", r.RunID, r.Status, printable(oneLine(r.Error, 2000)))
	}
	if r.TraceURL != "" {
		fmt.Fprintf(stdio.Err, "formica: trace %s\n", r.TraceURL)
	}
	return exitFor(r.Status), nil
}

func getCommand(args []string, stdio Stdio) int {
	return runCluster("get", "[--json] ID", args, stdio, true, nil,
		func(ctx context.Context, c *cluster, f *clusterFlags, pos []string) (int, error) {
			id, err := oneID(pos, "run")
			if err != nil {
				return 0, err
			}
			r, err := c.ops.GetRun(ctx, id)
			if err != nil {
				return 0, err
			}
			r = c.link(r)
			if f.json {
				return ExitOK, printJSON(stdio.Out, r)
			}
			w := newTable(stdio.Out)
			fmt.Fprintf(w, "run\t%s\nstatus\t%s\nattempts\t%d\ncreated\t%s\n", r.RunID, r.Status, r.Attempts, stamp(r.CreatedAt))
			fmt.Fprintf(w, "started\t%s\nfinished\t%s\ntokens\t%d in, %d out (run total; each thread below: its own)\n",
				stamp(r.StartedAt), stamp(r.FinishedAt), r.Usage.InputTokens, r.Usage.OutputTokens)
			if r.CostUSD != nil {
				fmt.Fprintf(w, "cost\t%s (run total)\n", fmtCost(*r.CostUSD))
			}
			fmt.Fprintf(w, "task\t%s\n", printable(oneLine(r.Task, 100)))
			if r.Error != "" {
				fmt.Fprintf(w, "error\t%s\n", printable(oneLine(r.Error, 500)))
			}
			if trace := cmp.Or(r.TraceURL, r.TraceID); trace != "" {
				fmt.Fprintf(w, "trace\t%s\n", trace)
			}
			if len(r.Budget) > 0 {
				fmt.Fprintf(w, "budget\t%s\n", budgetLine(r.Budget))
			}
			w.Flush()
			for _, l := range treeLines(r, time.Now()) {
				fmt.Fprintln(stdio.Out, "  "+l)
			}
			if r.Output != "" {
				fmt.Fprintf(stdio.Out, "\n%s\n", shown(stdio.Out, r.Output))
			}
			return ExitOK, nil
		})
}

func runsCommand(args []string, stdio Stdio) int {
	var status, page string
	var limit int
	return runCluster("runs", "[--status S] [--limit N] [--page CURSOR] [--json]", args, stdio, true, func(fs *flag.FlagSet) {
		fs.StringVar(&status, "status", "", "only runs with this `status` (queued, running, succeeded, failed, cancelled)")
		fs.IntVar(&limit, "limit", 20, "at most `N` runs, newest first")
		fs.StringVar(&page, "page", "", "the page after `CURSOR`, as the previous page printed it")
	}, func(ctx context.Context, c *cluster, f *clusterFlags, _ []string) (int, error) {
		runs, next, err := c.ops.ListRuns(ctx, status, limit, page)
		if err != nil {
			return 0, err
		}
		if next != "" {
			more := fmt.Sprintf("formica runs --limit %d --page %s", limit, next)
			if status != "" {
				more += " --status " + status
			}
			fmt.Fprintln(stdio.Err, "more:", more)
		}
		for i := range runs {
			runs[i] = c.link(runs[i])
		}
		return printList(stdio, f.json, runs, "ID\tSTATUS\tATTEMPTS\tCREATED\tCOST\tTASK", func(r record.Run) string {
			return fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s", r.RunID, r.Status, r.Attempts, stamp(r.CreatedAt), runCost(r), printable(oneLine(r.Task, 50)))
		})
	})
}

func watchCommand(args []string, stdio Stdio) int {
	var noTTY bool
	return runCluster("watch", "ID", args, stdio, false, func(fs *flag.FlagSet) {
		fs.BoolVar(&noTTY, "no-tty", false, "print the tree as log lines even on a terminal")
	}, func(ctx context.Context, c *cluster, _ *clusterFlags, pos []string) (int, error) {
		id, err := oneID(pos, "run")
		if err != nil {
			return 0, err
		}
		if _, err := c.ops.GetRun(ctx, id); err != nil {
			return 0, err
		}
		view := newTreeView(stdio.Err, isTerminal(stdio.Err) && !noTTY)
		view.start()
		if err := c.ops.Events(ctx, id, 0, view.send); err != nil {
			view.stop()
			return 0, err
		}
		r, err := waitFinal(ctx, c, id)
		if err != nil {
			view.stop()
			return 0, err
		}
		view.finish(r)
		return printOutcome(stdio, r, false)
	})
}

func cancelCommand(args []string, stdio Stdio) int {
	return runCluster("cancel", "ID", args, stdio, false, nil,
		func(ctx context.Context, c *cluster, _ *clusterFlags, pos []string) (int, error) {
			id, err := oneID(pos, "run")
			if err != nil {
				return 0, err
			}
			if err := c.ops.CancelRun(ctx, id); err != nil {
				return 0, err
			}
			fmt.Fprintf(stdio.Err, "cancelling %s\n", id)
			return ExitOK, nil
		})
}

func approvalsCommand(args []string, stdio Stdio) int {
	return runCluster("approvals", "[--json]", args, stdio, true, nil,
		func(ctx context.Context, c *cluster, f *clusterFlags, _ []string) (int, error) {
			as, err := c.ops.ListApprovals(ctx)
			if err != nil {
				return 0, err
			}
			return printList(stdio, f.json, as, "ID\tRUN\tTHREAD\tTOOL\tARGUMENTS\tREQUESTED", func(a api.Approval) string {
				tool := a.Tool
				if a.InDoubt {
					tool += " (in doubt: run again?)"
				}
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", a.ID, a.RunID, a.ThreadPath, tool, oneLine(a.Arguments, 60), stamp(a.RequestedAt))
			})
		})
}

func approveCommand(args []string, stdio Stdio) int {
	var allow, deny bool
	return runCluster("approve", "ID --allow|--deny", args, stdio, false, func(fs *flag.FlagSet) {
		fs.BoolVar(&allow, "allow", false, "allow the tool call")
		fs.BoolVar(&deny, "deny", false, "deny the tool call")
	}, func(ctx context.Context, c *cluster, _ *clusterFlags, pos []string) (int, error) {
		id, err := oneID(pos, "approval")
		if err != nil {
			return 0, err
		}
		if allow == deny {
			return 0, usagef("give exactly one of --allow and --deny")
		}
		if err := c.ops.Decide(ctx, id, allow); err != nil {
			return 0, err
		}
		return ExitOK, nil
	})
}

func workersCommand(args []string, stdio Stdio) int {
	return runCluster("workers", "[--json]", args, stdio, true, nil,
		func(ctx context.Context, c *cluster, f *clusterFlags, _ []string) (int, error) {
			ws, err := c.ops.Workers(ctx)
			if err != nil {
				return 0, err
			}
			return printList(stdio, f.json, ws, "ID\tHOST\tSLOTS\tRUNNING\tPARKED\tSANDBOX\tMCP\tLAST SEEN", func(x wire.WorkerInfo) string {
				servers := "-"
				if len(x.MCP) > 0 {
					servers = strings.Join(x.MCP, ",")
				}
				return fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s ago", x.ID, x.Host, x.Slots, x.Running, x.Parked, x.Sandbox,
					servers, time.Since(x.LastSeen).Round(time.Millisecond))
			})
		})
}

func assetsCommand(args []string, stdio Stdio) int {
	return runCluster("assets", "[--json]", args, stdio, true, nil,
		func(ctx context.Context, c *cluster, f *clusterFlags, _ []string) (int, error) {
			a, err := c.ops.Assets(ctx)
			if err != nil {
				return 0, err
			}
			if f.json {
				return ExitOK, printJSON(stdio.Out, a)
			}
			w := newTable(stdio.Out)
			fmt.Fprintln(w, "KIND\tSTREAMS\tCONSUMERS\tNAMES")
			for _, k := range a.Kinds {
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", k.Kind, k.Streams, k.Consumers, streamNames(k))
			}
			fmt.Fprintf(w, "total\t%d\t%d\n", a.Streams, a.Consumers)
			return ExitOK, w.Flush()
		})
}

// streamNames is the NAMES column of `formica assets`: a kind's first
// streams, and how many more it has.
func streamNames(k wire.AssetKind) string {
	const shown = 3
	if k.Streams == 0 {
		return "-"
	}
	names := strings.Join(k.Names[:min(shown, len(k.Names))], ",")
	if more := k.Streams - min(shown, len(k.Names)); more > 0 {
		names += fmt.Sprintf(" (+%d more)", more)
	}
	return names
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

// runCost is the COST column of `formica runs`: what the run's tree cost
// (so far, while it runs), or "-" before its first model call or when a
// model of it has no price.
func runCost(r record.Run) string {
	t := r.Sum()
	if t.CostUSD == nil || (t.InputTokens+t.OutputTokens == 0 && *t.CostUSD == 0) {
		return "-"
	}
	return fmtCost(*t.CostUSD)
}

// budgetLine is a budget's use as "tokens 123/1000, usd $0.99/$1.00,
// spawns 3/10, ...".
func budgetLine(u limits.Use) string {
	var parts []string
	for _, k := range []limits.Kind{limits.KindTokens, limits.KindInputTokens, limits.KindOutputTokens, limits.KindUSD, limits.KindDuration, limits.KindSpawns} {
		a, ok := u[k]
		if !ok {
			continue
		}
		switch k {
		case limits.KindUSD:
			parts = append(parts, fmt.Sprintf("%s %s/%s", k, limits.FormatUSD(a.Used), limits.FormatUSD(a.Limit)))
		case limits.KindDuration:
			parts = append(parts, fmt.Sprintf("%s %s/%s", k, time.Duration(a.Used)*time.Millisecond, time.Duration(a.Limit)*time.Millisecond))
		default:
			parts = append(parts, fmt.Sprintf("%s %d/%d", k, a.Used, a.Limit))
		}
	}
	return strings.Join(parts, ", ")
}
