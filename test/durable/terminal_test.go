package durable_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// fanOutTask is a sim task of n parallel helpers named h01, h02, ... in
// call order.
func fanOutTask(n int) string {
	var b strings.Builder
	b.WriteString("Fan out:")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\n- h%02d", i)
	}
	return b.String()
}

// inTerminal runs formica with args, its stderr on a pseudo-terminal of
// cols×rows (stdin too, stdout a pipe), and returns what the terminal and
// stdout got and the exit code.
func inTerminal(t *testing.T, cols, rows int, env []string, args ...string) (screen, stdout string, code int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin.formica, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GORACE=" + os.Getenv("GORACE")}, env...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdin, cmd.Stderr, cmd.Stdout = tty, tty, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	term := readAll(t, ptmx, cmd)
	code = cmd.ProcessState.ExitCode()
	if strings.Contains(term.String(), "WARNING: DATA RACE") {
		t.Errorf("formica reported a data race:\n%s", term.String())
	}
	return term.String(), out.String(), code
}

// readAll reads the terminal until cmd has ended and everything it wrote
// was read (the read then fails with EIO), both bounded.
func readAll(t *testing.T, ptmx *os.File, cmd *exec.Cmd) bytes.Buffer {
	t.Helper()
	var term bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&term, ptmx); close(copied) }()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cliTimeout):
		cmd.Process.Kill()
		<-done
		t.Errorf("formica %s did not end within %v", cmd.Args[1], cliTimeout)
	}
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		t.Errorf("the terminal of formica %s stayed open", cmd.Args[1])
	}
	ptmx.Close()
	<-copied
	return term
}

var (
	ansi     = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	rowRE    = regexp.MustCompile(`^\s*(\S+) (h\d\d|formica)  depth (\d)  ([a-z ]+?)  (\d+ms|\d+\.\ds)  (\d+) tok`)
	totalsRE = regexp.MustCompile(`threads: (\d+) done,[ \n](\d+) running,[ \n](\d+) failed,[ \n](\d+) cancelled,[ \n](\d+) refused\n?(?: · )?run total (\d+) in, (\d+) out tokens`)
)

// frames splits terminal output into the frames the tree drew: each starts
// where the cursor went back up to redraw, or the screen was erased below.
func frames(screen string) [][]string {
	var out [][]string
	for _, f := range regexp.MustCompile(`\x1b\[\d+A|\x1b\[J`).Split(screen, -1) {
		var lines []string
		for _, l := range strings.Split(f, "\n") {
			l = strings.Trim(ansi.ReplaceAllString(l, ""), "\r")
			if l != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			out = append(out, lines)
		}
	}
	return out
}

// checkTerminalTree checks what a live tree of the fan-out drew on a
// terminal cols wide against the run's record.
func checkTerminalTree(t *testing.T, screen string, cols, helpers int, rec record.Run) {
	t.Helper()
	for _, l := range strings.Split(ansi.ReplaceAllString(screen, ""), "\n") {
		l = strings.TrimSuffix(strings.TrimPrefix(l, "\r"), "\r")
		if n := utf8.RuneCountInString(l); n > cols {
			t.Errorf("a %d-column line on a %d-column terminal: %q", n, cols, l)
		}
	}
	fs := frames(screen)
	if len(fs) < 2 {
		t.Fatalf("the tree drew %d frames:\n%q", len(fs), screen)
	}
	// Elapsed ticks: h01 runs for the model's latency, in which no event
	// comes, and the frames show its time go up.
	seen := map[string]bool{}
	for _, f := range fs {
		for _, l := range f {
			if m := rowRE.FindStringSubmatch(l); m != nil && m[2] == "h01" && m[4] == "running" {
				seen[m[5]] = true
			}
		}
	}
	if len(seen) < 3 {
		t.Errorf("h01's elapsed time took %d values while it ran (%v), want it ticking", len(seen), seen)
	}
	// The final frame: every thread, the root then h01..hN in call order,
	// each with its own tokens from the record, then the totals line.
	final := fs[len(fs)-1]
	own := map[string]int64{}
	for _, th := range rec.Threads {
		own[th.Name] = th.Usage.InputTokens + th.Usage.OutputTokens
	}
	var names []string
	for _, l := range final {
		if m := rowRE.FindStringSubmatch(l); m != nil {
			names = append(names, m[2])
			if got := m[6]; got != fmt.Sprint(own[m[2]]) {
				t.Errorf("row %s shows %s tokens, the record %d", m[2], got, own[m[2]])
			}
		}
	}
	// On a narrow terminal the totals take two lines rather than lose numbers.
	totals := totalsRE.FindStringSubmatch(strings.Join(final, "\n"))
	want := []string{"formica"}
	for i := 1; i <= helpers; i++ {
		want = append(want, fmt.Sprintf("h%02d", i))
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("final frame rows %v, want %v\nframe:\n%s", names, want, strings.Join(final, "\n"))
	}
	if totals == nil {
		t.Fatalf("no totals line in the final frame:\n%s", strings.Join(final, "\n"))
	}
	wantTotals := []string{fmt.Sprint(helpers + 1), "0", "0", "0", "0", fmt.Sprint(rec.Usage.InputTokens), fmt.Sprint(rec.Usage.OutputTokens)}
	if strings.Join(totals[1:], " ") != strings.Join(wantTotals, " ") {
		t.Errorf("totals %v, want done/running/failed/refused/in/out %v", totals[1:], wantTotals)
	}
}

// TestLiveTreeInTerminal drives `formica run` and `formica watch` in
// pseudo-terminals 50 and 120 columns wide on a slow sim fan-out of 50
// helpers.
func TestLiveTreeInTerminal(t *testing.T) {
	const helpers = 50
	agent := writeFile(t, "slow.yaml", "name: formica\nmodel: sim\nmodel_args: {latency_ms: 1500}\ntools: [agent]\n")
	task := fanOutTask(helpers)
	for _, cols := range []int{50, 120} {
		t.Run(fmt.Sprintf("run/%d", cols), func(t *testing.T) {
			screen, stdout, code := inTerminal(t, cols, 30, nil, "run", "--agent", agent, "--agent-max-threads", "64",
				"--cwd", t.TempDir(), "--json", task)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, screen)
			}
			var rec record.Run
			if err := json.Unmarshal([]byte(stdout), &rec); err != nil {
				t.Fatalf("stdout is not the record: %v\n%s", err, stdout)
			}
			checkTerminalTree(t, screen, cols, helpers, rec)
		})
	}
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 64)
	for _, cols := range []int{50, 120} {
		t.Run(fmt.Sprintf("watch/%d", cols), func(t *testing.T) {
			id := fmt.Sprintf("watch-%d", cols)
			if r := c.cli("submit", "--id", id, "--agent", agent, "--agent-max-threads", "64", task); r.code != 0 {
				t.Fatalf("submit: exit %d\n%s", r.code, r.stderr)
			}
			screen, _, code := inTerminal(t, cols, 30, []string{"FORMICA_NATS=" + c.url, "FORMICA_NATS_CREDS=" + c.clientCreds()}, "watch", id)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, screen)
			}
			checkTerminalTree(t, screen, cols, helpers, c.record(id))
		})
	}
	// The commands that start a cluster run and follow it say its id first
	// and draw its tree.
	env := []string{"FORMICA_NATS=" + c.url, "FORMICA_NATS_CREDS=" + c.clientCreds()}
	follows := func(t *testing.T, args ...string) record.Run {
		t.Helper()
		screen, stdout, code := inTerminal(t, 120, 30, env, args...)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, screen)
		}
		var rec record.Run
		if err := json.Unmarshal([]byte(stdout), &rec); err != nil {
			t.Fatalf("stdout is not the record: %v\n%s", err, stdout)
		}
		if first := frames(screen); len(first) == 0 || first[0][0] != "formica: run "+rec.RunID {
			t.Errorf("the first line is not the run's id %s:\n%s", rec.RunID, screen)
		}
		checkTerminalTree(t, screen, 120, helpers, rec)
		return rec
	}
	t.Run("run --nats", func(t *testing.T) {
		follows(t, "run", "--agent", agent, "--agent-max-threads", "64", "--json", task)
	})
	t.Run("submit --wait", func(t *testing.T) {
		follows(t, "submit", "--id", "follow-1", "--wait", "--agent", agent, "--agent-max-threads", "64", "--json", task)
	})
	t.Run("resume --wait", func(t *testing.T) {
		const id = "follow-2"
		if r := c.cli("submit", "--id", id, "--agent", agent, "--agent-max-threads", "64", task); r.code != 0 {
			t.Fatalf("submit: exit %d\n%s", r.code, r.stderr)
		}
		proc.WaitUntil(t, runTimeout, "run "+id+" runs", func() bool { return c.record(id).Status == event.Running })
		if r := c.cli("cancel", id); r.code != 0 {
			t.Fatalf("cancel: exit %d\n%s", r.code, r.stderr)
		}
		proc.WaitUntil(t, runTimeout, "run "+id+" is cancelled", func() bool { return c.record(id).Status == event.Cancelled })
		if rec := follows(t, "resume", "--wait", "--json", id); rec.Resumes != 1 {
			t.Errorf("the record shows %d resumes, want 1", rec.Resumes)
		}
	})
}

// TestTerminalEscapesControlCharacters: a task and an output holding ESC
// and NUL reach a terminal as visible escapes, never raw.
func TestTerminalEscapesControlCharacters(t *testing.T) {
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 4)
	task := "Evil \x1b]0;pwned\x07 \x1b[2J task\x00"
	c.submit(map[string]any{"id": "evil-1", "task": task})
	c.waitFinal("evil-1")
	for _, args := range [][]string{{"get", "evil-1"}, {"runs"}, {"watch", "evil-1"}} {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin.formica, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "FORMICA_NATS=" + c.url, "FORMICA_NATS_CREDS=" + c.clientCreds()}
		cmd.Dir = filepath.Dir(bin.formica)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		out := readAll(t, ptmx, cmd)
		// The tree's own cursor moves and colours aside, no ESC may come
		// from the task; the escapes show instead.
		got := ansi.ReplaceAllString(out.String(), "")
		if strings.ContainsAny(got, "\x1b\x00\x07") {
			t.Errorf("formica %s wrote raw control characters: %q", args[0], got)
		}
		if args[0] != "watch" && !strings.Contains(got, `\x1b`) {
			t.Errorf("formica %s: no escaped ESC in %q", args[0], got)
		}
	}
}
