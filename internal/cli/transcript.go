package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/journal"
)

func resumeCommand(args []string, stdio Stdio) int {
	var wait, noTTY bool
	return runCluster("resume", "[--wait] [--no-tty] [--json] ID", args, stdio, true, func(fs *flag.FlagSet) {
		fs.BoolVar(&wait, "wait", false, "stream the run's tree and print its output when it ends")
		fs.BoolVar(&noTTY, "no-tty", false, "with --wait, print the tree as log lines even on a terminal")
	}, func(ctx context.Context, c *cluster, f *clusterFlags, pos []string) (int, error) {
		id, err := oneID(pos, "run")
		if err != nil {
			return 0, err
		}
		if !wait {
			if err := c.ops.ResumeRun(ctx, id); err != nil {
				return 0, err
			}
			fmt.Fprintln(stdio.Out, id)
			return ExitOK, nil
		}
		// The tree is this execution's: the events after the last one
		// the run had.
		after, err := c.ops.LastEventID(ctx, id)
		if err != nil {
			return 0, err
		}
		return followRun(ctx, c, stdio, f, after, noTTY, func() (string, error) { return id, c.ops.ResumeRun(ctx, id) })
	})
}

func transcriptCommand(args []string, stdio Stdio) int {
	return runCluster("transcript", "[--json] ID [THREAD_ID|PATH]", args, stdio, true, nil,
		func(ctx context.Context, c *cluster, f *clusterFlags, pos []string) (int, error) {
			if len(pos) < 1 || len(pos) > 2 || pos[0] == "" {
				return 0, usagef("give a run id and, optionally, a thread id or path (formica/research)")
			}
			id, thread := pos[0], journal.RootID(pos[0])
			if len(pos) == 2 {
				var err error
				if thread, err = findThread(ctx, c, id, pos[1]); err != nil {
					return 0, err
				}
			}
			t, err := c.ops.Transcript(ctx, id, thread)
			if err != nil {
				return 0, err
			}
			if f.json {
				return ExitOK, printJSON(stdio.Out, t)
			}
			printTranscript(stdio.Out, t)
			return ExitOK, nil
		})
}

// findThread resolves a thread id or path (names from the root down; the
// root may also be called "root") to a thread id.
func findThread(ctx context.Context, c *cluster, run, arg string) (string, error) {
	threads, err := c.ops.Threads(ctx, run)
	if err != nil {
		return "", err
	}
	if slices.ContainsFunc(threads, func(t api.ThreadSummary) bool { return t.ID == arg }) {
		return arg, nil
	}
	var found []api.ThreadSummary
	for _, t := range threads {
		if t.Path == arg || tail(t.Path) == tail(arg) && strings.HasPrefix(arg, "root") {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		return "", usagef("run %s has no thread %q (see GET /v1/runs/%s/threads)", run, arg, run)
	case 1:
		return found[0].ID, nil
	}
	return "", usagef("%d threads of run %s have the path %q: give a thread id", len(found), run, arg)
}

// tail is a path without its first segment (the root's name).
func tail(path string) string {
	_, rest, _ := strings.Cut(path, "/")
	return rest
}

// printTranscript writes a transcript for people: the thread, then its
// journal entry by entry.
func printTranscript(w io.Writer, t api.Transcript) {
	fmt.Fprintf(w, "thread %s  %s  %s", t.Path, t.ThreadID, t.Status)
	if t.Worker != "" {
		fmt.Fprintf(w, "  on %s", t.Worker)
	}
	fmt.Fprintf(w, "  %d in, %d out tokens\n", t.Usage.InputTokens, t.Usage.OutputTokens)
	for _, e := range t.Entries {
		switch e.Kind {
		case journal.KindStart:
			section(w, "system", e.System)
			section(w, "user", e.Task)
		case journal.KindModel:
			if e.Message == nil {
				continue
			}
			head := fmt.Sprintf("assistant (turn %d, %s, %d ms, %d in / %d out)", e.Turn, e.Model, e.LatencyMS, e.Usage.InputTokens, e.Usage.OutputTokens)
			section(w, head, e.Message.Content)
			for _, c := range e.Message.ToolCalls {
				fmt.Fprintf(w, "  -> %s %s  [%s]\n", c.Name, printable(c.Arguments), c.ID)
			}
		case journal.KindTool:
			section(w, fmt.Sprintf("tool %s [%s] %s, %d ms", e.Tool, e.CallID, e.ToolStatus, e.DurationMS), e.Result)
		case journal.KindApproval:
			verdict := "denied"
			if e.Allow {
				verdict = "allowed"
			}
			fmt.Fprintf(w, "-- approval %s [%s]: %s %s\n", e.Tool, e.CallID, verdict, printable(e.Reason))
		case journal.KindSpawn:
			fmt.Fprintf(w, "-- spawned %s [%s] as thread %s\n", printable(e.Name), e.CallID, e.Child)
		case journal.KindRefusal:
			fmt.Fprintf(w, "-- spawn of %s [%s] refused: %s\n", printable(e.Name), e.CallID, e.Reason)
		case journal.KindCorrection:
			section(w, "user (schema correction)", e.Content)
		case journal.KindHandoff:
			fmt.Fprintf(w, "-- handed off to %s\n", printable(e.Target))
		case journal.KindElision:
			bytes := 0
			for _, el := range e.Elided {
				bytes += el.Bytes
			}
			fmt.Fprintf(w, "-- elided %d old tool results (%d bytes) before turn %d to fit the context window: about %d -> %d of %d tokens\n",
				len(e.Elided), bytes, e.Turn, e.TokensBefore, e.TokensAfter, e.Window)
			for _, el := range e.Elided {
				fmt.Fprintf(w, "     %s [%s] %d bytes\n", printable(el.Tool), el.CallID, el.Bytes)
			}
		case journal.KindSummary:
			head := fmt.Sprintf("summary of %d earlier messages before turn %d (%s, %d in / %d out): about %d -> %d of %d tokens",
				e.Summarized, e.Turn, e.Model, e.Usage.InputTokens, e.Usage.OutputTokens, e.TokensBefore, e.TokensAfter, e.Window)
			section(w, head, e.Content)
		case journal.KindPlacement:
			fmt.Fprintf(w, "-- placed on %s (attempt %d)\n", e.Worker, e.Attempt)
		case journal.KindEnd:
			section(w, "end: "+string(e.Status), cmp.Or(e.Error, e.Output))
		}
	}
}

func section(w io.Writer, head, body string) {
	fmt.Fprintf(w, "== %s\n", head)
	if body != "" {
		fmt.Fprintln(w, printable(body))
	}
}
