package durable_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// readmeSection is the README section whose examples TestReadmeExamples runs.
const readmeSection = "## Durable runs, the HTTP API and the CLI"

// Addresses the README's examples use, replaced by the test's own.
const (
	readmeNATS    = "127.0.0.1:4222"
	readmeHTTP    = "127.0.0.1:8080"
	readmeHTTPAny = "0.0.0.0:8080"
	readmeData    = "./formica-data"
)

// readmeBlocks returns the fenced blocks of the section with the given info
// string ("sh", or "" for plain fences), in order.
func readmeBlocks(t *testing.T, info string) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n"+readmeSection+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", readmeSection)
	}
	text = text[start+len(readmeSection)+2:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var (
		blocks [][]string
		cur    []string
		in     bool
		kind   string
	)
	for _, line := range strings.Split(text, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, kind, cur = true, strings.TrimPrefix(line, "```"), nil
		case in && line == "```":
			if kind == info {
				blocks = append(blocks, cur)
			}
			in = false
		case in:
			cur = append(cur, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README section %q has no ```%s blocks", readmeSection, info)
	}
	return blocks
}

// readmeSession is what the README's sh blocks do with one coordinator: the
// variables they export, the processes they start in the background, and
// the shell lines that follow.
type readmeSession struct {
	env []string
	// setup are the lines that run before any process starts (issuing
	// credentials with `coordinator creds`).
	setup   []string
	procs   [][]string // words of each `... &` line
	procEnv []int      // how many of env each process sees: the exports before it
	script  []string
}

var envAssign = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=[^$\x60'"\s]*$`)

// readmeSessions splits the sh blocks into sessions: each line starting a
// coordinator begins one. `go install` is skipped (TestMain built the
// binaries and they are first on PATH), `export VAR=value` sets the
// session's environment, and a `coordinator ... &` or `worker ... &` line is
// started by the test (so it can wait until the process is ready and kill it
// at the end). Everything else runs, in order, in one bash script.
func readmeSessions(t *testing.T) []*readmeSession {
	t.Helper()
	var out []*readmeSession
	command := func(line string) (words []string, cmd string, background bool) {
		words = strings.Fields(line)
		for _, w := range words {
			if !envAssign.MatchString(w) {
				cmd = w
				break
			}
		}
		return words, cmd, strings.HasSuffix(strings.TrimSpace(line), " &")
	}
	for _, block := range readmeBlocks(t, "sh") {
		for _, line := range block {
			if _, cmd, background := command(line); cmd == "coordinator" && background {
				out = append(out, &readmeSession{}) // the block starts a session
				break
			}
		}
		for _, line := range block {
			words, cmd, background := command(line)
			if len(words) > 2 && words[0] == "go" && words[1] == "install" {
				continue
			}
			if len(out) == 0 {
				t.Fatalf("README: %q comes before any coordinator is started", line)
			}
			s := out[len(out)-1]
			switch {
			case len(words) == 2 && words[0] == "export" && envAssign.MatchString(words[1]):
				s.env = append(s.env, words[1])
			case cmd == "coordinator" && !background && len(words) > 1 && words[1] == "creds":
				if len(s.procs) > 0 || len(s.script) > 0 {
					t.Fatalf("README: %q issues credentials after processes or commands; issue them first", line)
				}
				s.setup = append(s.setup, line)
			case background && (cmd == "coordinator" || cmd == "worker"):
				if len(s.script) > 0 {
					t.Fatalf("README: %q starts a process after shell commands; start processes first", line)
				}
				s.procs = append(s.procs, words[:len(words)-1])
				s.procEnv = append(s.procEnv, len(s.env))
			default:
				s.script = append(s.script, line)
			}
		}
	}
	return out
}

// run starts the session's processes with the test's addresses in place of
// the README's, calls before, then runs its script with bash and returns
// the script's stdout and the coordinator.
func (s *readmeSession) run(t *testing.T, before func(c *coord)) (string, *coord) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README examples need %s: %v", tool, err)
		}
	}
	var c *coord
	var repl *strings.Replacer
	for attempt := 1; c == nil; attempt++ {
		ports := proc.FreePorts(t, 2)
		dataDir := t.TempDir()
		repl = strings.NewReplacer(readmeNATS, fmt.Sprintf("127.0.0.1:%d", ports[0]),
			readmeHTTP, fmt.Sprintf("127.0.0.1:%d", ports[1]), readmeHTTPAny, fmt.Sprintf("0.0.0.0:%d", ports[1]),
			readmeData, dataDir)
		c = &coord{t: t, name: "README coordinator", url: proc.NATSURL(ports[0]), api: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
			dataDir: dataDir, cwd: t.TempDir()}
		env := []string{"PATH=" + bin.dir + string(os.PathListSeparator) + os.Getenv("PATH")}
		baseEnv := len(env)
		for _, e := range s.env {
			env = append(env, repl.Replace(e))
			if v, ok := strings.CutPrefix(e, "FORMICA_HTTP_TOKEN="); ok {
				c.token = v
			}
		}
		// Setup, processes and script share one working directory, where
		// relative paths (credentials files) resolve.
		work := t.TempDir()
		if len(s.setup) > 0 {
			setup := "set -euxo pipefail\n" + repl.Replace(strings.Join(s.setup, "\n")) + "\n"
			sh := proc.StartWith(t, proc.Options{Env: env, Dir: work}, "README setup", "bash", "-c", setup)
			if code := sh.Wait(t, runTimeout); code != 0 {
				t.Fatalf("the README's setup failed (exit %d)", code)
			}
		}
		started := true
		var procs []*proc.Proc
		for i, words := range s.procs {
			// A process sees only what was exported before it, as in a shell.
			penv := slices.Clip(env[:baseEnv+s.procEnv[i]])
			for len(words) > 0 && envAssign.MatchString(words[0]) {
				penv, words = append(penv, words[0]), words[1:]
			}
			args := make([]string, len(words)-1)
			for i, w := range words[1:] {
				args[i] = repl.Replace(w)
			}
			// The examples as written, plus what lets the test's own runs
			// replay scripted models.
			if words[0] == "coordinator" || words[0] == "worker" {
				args = append(args, "--allow-scripted")
			}
			switch words[0] {
			case "coordinator":
				p := proc.StartWith(t, proc.Options{Env: penv, Dir: c.cwd}, "README coordinator", bin.coordinator, args...)
				procs = append(procs, p)
				c.p = p
				if !p.AwaitLog(t, "coordinator ready", readyTimeout) {
					if attempt == 3 || !strings.Contains(p.Stderr.String(), "address already in use") {
						t.Fatalf("README coordinator %v did not start (%s)", args, p.Status())
					}
					started = false
				}
			case "worker":
				p := proc.StartWith(t, proc.Options{Env: penv, Dir: work}, "README worker", bin.worker, args...)
				procs = append(procs, p)
				p.WaitLog(t, "worker ready", readyTimeout)
				proc.WaitUntil(t, readyTimeout, "the coordinator lists the README's worker", func() bool {
					var ws []struct{ ID string }
					c.getJSON("/v1/workers", &ws)
					return len(ws) > 0
				})
			}
			if !started {
				break
			}
		}
		if !started {
			for _, p := range procs {
				p.Kill(t)
			}
			c = nil
			continue
		}
		if before != nil {
			before(c)
		}
		script := "set -euxo pipefail\n" + repl.Replace(strings.Join(s.script, "\n")) + "\n"
		sh := proc.StartWith(t, proc.Options{Env: env, Dir: work}, "README script", "bash", "-c", script)
		if code := sh.Wait(t, 2*runTimeout); code != 0 {
			t.Fatalf("the README's examples failed (exit %d); the trace is in the script's stderr below\nstdout:\n%s", code, sh.Stdout.String())
		}
		if strings.Contains(sh.Stdout.String(), `{"error":`) {
			t.Errorf("an API example answered with an error:\n%s", sh.Stdout.String())
		}
		if testing.Verbose() {
			t.Logf("README session trace:\n%s", proc.Tail(sh.Stderr.String(), 8<<10))
		}
		return sh.Stdout.String(), c
	}
	panic("unreachable")
}

// TestReadmeExamples runs the sh blocks of the README's section on durable
// runs, the HTTP API and the CLI against live processes, then checks what
// they did: every run they submitted ended as it should, both held approvals
// were answered (one allowed, one denied), and the token example was
// refused without its token.
func TestReadmeExamples(t *testing.T) {
	t.Parallel()
	sessions := readmeSessions(t)
	if len(sessions) != 2 {
		t.Fatalf("README: %d sessions (blocks that start a coordinator), want 2", len(sessions))
	}

	// The main session, with two tool calls held for approval first: the
	// CLI example allows one, the curl example denies the other.
	var asked []string
	_, c := sessions[0].run(t, func(c *coord) {
		for _, tag := range []string{"readme-1", "readme-2"} {
			script, _ := approvalScript(t, tag)
			run := c.submit(map[string]any{"task": "root-" + tag, "model": "scripted:" + script})
			c.waitApproval(run)
			asked = append(asked, run)
		}
	})
	var runs []record.Run
	c.call(http.StatusOK, http.MethodGet, "/v1/runs?limit=1000", nil, &runs)
	statuses := map[event.Status]int{}
	for _, r := range runs {
		r = c.waitFinal(r.RunID)
		statuses[r.Status]++
	}
	// Submitted: the launch plan, launch-1 (three times), plan-1, two slow
	// runs (cancelled), and the two that asked.
	if len(runs) != 7 || statuses[event.Succeeded] != 5 || statuses[event.Cancelled] != 2 {
		t.Errorf("%d runs, by status %v; want 5 succeeded, 2 cancelled", len(runs), statuses)
	}
	if r := c.record("launch-1"); r.Status != event.Succeeded || r.Attempts != 1 {
		t.Errorf("launch-1: %s, %d attempts", r.Status, r.Attempts)
	}
	decisions := map[string]int{}
	written := 0
	for i, run := range asked {
		decisions[c.resolved(run).Decision]++
		// The coordinator has no --cwd: runs act in its working directory.
		if _, err := os.Stat(filepath.Join(c.cwd, fmt.Sprintf("out-readme-%d.txt", i+1))); err == nil {
			written++
		}
	}
	if written != 1 {
		t.Errorf("%d files written by the approved tool calls in the coordinator's directory, want 1", written)
	}
	if decisions["allow"] != 1 || decisions["deny"] != 1 {
		t.Errorf("decisions on the held approvals: %v; want one allow (CLI) and one deny (curl)", decisions)
	}
	var left []api.Approval
	c.call(http.StatusOK, http.MethodGet, "/v1/approvals", nil, &left)
	if len(left) != 0 {
		t.Errorf("approvals left: %+v", left)
	}
	c.p.Kill(t)

	out, _ := sessions[1].run(t, nil)
	if lines := strings.SplitN(out, "\n", 2); len(lines) != 2 || lines[0] != "401" || !strings.HasPrefix(strings.TrimSpace(lines[1]), "[") {
		t.Errorf("the token example printed %q; want 401, then the run list", out)
	}
}

// TestReadmeCLIUsage: every flag the README's CLI summary names is one the
// command accepts.
func TestReadmeCLIUsage(t *testing.T) {
	t.Parallel()
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	var block []string
	for _, b := range readmeBlocks(t, "") {
		if len(b) > 0 && strings.HasPrefix(b[0], "formica ") {
			block = b
		}
	}
	if block == nil {
		t.Fatal("README: no CLI summary block")
	}
	cmd := ""
	for _, line := range block {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "formica" {
			cmd = f[1]
		}
		if cmd == "" {
			continue
		}
		// Only the synopsis part of the line: the description follows two spaces or more.
		synopsis := line
		if f := regexp.MustCompile(`\S\s{2,}\S`).FindStringIndex(strings.TrimLeft(line, " ")); f != nil {
			synopsis = strings.TrimLeft(line, " ")[:f[0]+1]
		}
		p := proc.Start(t, "formica "+cmd+" -h", bin.formica, cmd, "-h")
		p.Wait(t, cliTimeout)
		help := p.Stderr.String() + p.Stdout.String()
		for _, flag := range flagRE.FindAllString(synopsis, -1) {
			if !strings.Contains(help, "-"+strings.TrimPrefix(flag, "--")+" ") && !strings.Contains(help, "-"+strings.TrimPrefix(flag, "--")+"\n") {
				t.Errorf("README: formica %s %s: not in its help:\n%s", cmd, flag, help)
			}
		}
	}
}
