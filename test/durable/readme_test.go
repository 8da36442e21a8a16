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

// docSection is a section of a page of the documentation (its path from
// the repository's root) found by its heading; a "# " heading is the whole
// page.
type docSection struct{ page, heading string }

func (d docSection) String() string { return d.page + " " + d.heading }

// Documentation sections whose sh blocks the tests run. The durable runs'
// examples are one session over two pages: the CLI's, then the HTTP API's.
var (
	readmeDurable  = []docSection{{"docs/cli.md", "# Durable runs and the CLI"}, {"docs/api.md", "# The HTTP API"}}
	readmeCluster  = []docSection{{"docs/cluster.md", "# Run a cluster"}}
	readmeSecurity = []docSection{{"docs/security.md", "# Security"}}
)

// Addresses and paths the documentation's examples use, replaced by the test's own.
const (
	readmeNATS     = "127.0.0.1:4222"
	readmeNATSAny  = "0.0.0.0:4222"
	readmeNATSHost = "coord:4222" // the coordinator's machine, seen from another
	readmeHTTP     = "127.0.0.1:8080"
	readmeHTTPAny  = "0.0.0.0:8080"
	readmeData     = "./formica-data"
	readmeDataSys  = "/var/lib/formica"
)

// readmeBlocks returns the fenced blocks of the given documentation
// sections with the given info string ("sh", or "" for plain fences), in
// order. A section runs from its heading to the next heading of its level
// or above (outside fenced blocks).
func readmeBlocks(t *testing.T, sections []docSection, info string) [][]string {
	t.Helper()
	var blocks [][]string
	for _, sec := range sections {
		data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(sec.page)))
		if err != nil {
			t.Fatal(err)
		}
		level := strings.Index(sec.heading, " ")
		var (
			found, inSection, in bool
			cur                  []string
			kind                 string
		)
		for _, line := range strings.Split(string(data), "\n") {
			if !in {
				if line == sec.heading {
					found, inSection = true, true
					continue
				}
				if h := strings.Index(line, "# "); inSection && h >= 0 && h < level && strings.Trim(line[:h+1], "#") == "" {
					inSection = false
				}
			}
			if !inSection {
				continue
			}
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
		if !found {
			t.Fatalf("%s has no section %q", sec.page, sec.heading)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%v: no ```%s blocks", sections, info)
	}
	return blocks
}

// readmeSession is what the documentation's sh blocks do with one coordinator: the
// variables they export, the processes they start, and the shell lines
// around them.
type readmeSession struct {
	env []string
	// setup are the lines that run before any process starts (issuing
	// credentials, writing configuration).
	setup   []string
	procs   [][]string // words of each process's line
	procEnv []int      // how many of env each process sees: the exports before it
	script  []string
}

// hasCoordinator says whether the session starts a coordinator.
func (s *readmeSession) hasCoordinator() bool {
	for _, words := range s.procs {
		if _, cmd := readmeCommand(words); cmd == "coordinator" {
			return true
		}
	}
	return false
}

var (
	envAssign = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=[^$\x60'"\s]*$`)
	goRunCmd  = regexp.MustCompile(`\bgo run \./cmd/([a-z]+)\b`)
)

// readmeCommand returns the words of a line after its variable assignments,
// and the command they run.
func readmeCommand(words []string) (rest []string, cmd string) {
	for i, w := range words {
		if !envAssign.MatchString(w) {
			return words[i:], w
		}
	}
	return nil, ""
}

// readmeProcess says whether a line's words start a long-running process
// the test starts itself: a coordinator, a worker or a NATS server, in
// the background (`&`) or, as on a machine of its own, in the foreground.
func readmeProcess(words []string) bool {
	rest, cmd := readmeCommand(words)
	switch cmd {
	case "worker", "coordinator":
		return len(rest) < 2 || (rest[1] != "creds" && rest[1] != "healthcheck")
	case "nats-server":
		return true
	}
	return false
}

// readmeSessions splits the sh blocks of a section into sessions: a block
// starting a coordinator when the session has one begins the next. `go
// run ./cmd/X` is X (TestMain built the binaries and they are first on
// PATH), `go install` is skipped, `export VAR=value` sets the session's
// environment, and each coordinator, worker or nats-server line is started
// by the test (so it can wait until the process is ready and kill it at
// the end). The other lines run in one bash script before the processes
// start (setup) or after them (script).
func readmeSessions(t *testing.T, section []docSection) []*readmeSession {
	t.Helper()
	var out []*readmeSession
	for _, block := range readmeBlocks(t, section, "sh") {
		for i, line := range block {
			block[i] = goRunCmd.ReplaceAllString(line, "$1")
		}
		for _, line := range block {
			words := strings.Fields(line)
			if _, cmd := readmeCommand(words); cmd == "coordinator" && readmeProcess(words) && len(out) > 0 && out[len(out)-1].hasCoordinator() {
				out = append(out, &readmeSession{}) // the block starts the next session
				break
			}
		}
		for _, line := range block {
			if c := strings.Index(line, " #"); c >= 0 && readmeProcess(strings.Fields(line)) {
				line = line[:c] // a process line's comment
			}
			words := strings.Fields(line)
			if len(words) > 2 && words[0] == "go" && words[1] == "install" {
				continue
			}
			if len(out) == 0 {
				out = append(out, &readmeSession{})
			}
			s := out[len(out)-1]
			switch {
			case len(words) == 2 && words[0] == "export" && envAssign.MatchString(words[1]):
				s.env = append(s.env, words[1])
			case readmeProcess(words):
				if len(s.script) > 0 {
					t.Fatalf("docs: %q starts a process after shell commands; start processes first", line)
				}
				if words[len(words)-1] == "&" {
					words = words[:len(words)-1]
				}
				s.procs = append(s.procs, words)
				s.procEnv = append(s.procEnv, len(s.env))
			case len(s.procs) == 0:
				s.setup = append(s.setup, line)
			default:
				s.script = append(s.script, line)
			}
		}
	}
	for _, s := range out {
		if !s.hasCoordinator() {
			t.Fatalf("%v: a session starts no coordinator", section)
		}
	}
	return out
}

// run starts the session's processes with the test's addresses in place of
// the documentation's, calls before, then runs its script with bash and returns
// the script's stdout and the coordinator.
func (s *readmeSession) run(t *testing.T, before func(c *coord)) (string, *coord) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the documentation's examples need %s: %v", tool, err)
		}
	}
	var c *coord
	var repl *strings.Replacer
	for attempt := 1; c == nil; attempt++ {
		ports := proc.FreePorts(t, 2)
		dataDir := t.TempDir()
		natsAddr, httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
		repl = strings.NewReplacer(readmeNATS, natsAddr, readmeNATSAny, fmt.Sprintf("0.0.0.0:%d", ports[0]), readmeNATSHost, natsAddr,
			readmeHTTP, httpAddr, readmeHTTPAny, fmt.Sprintf("0.0.0.0:%d", ports[1]),
			readmeData, dataDir, readmeDataSys, dataDir)
		// Setup, processes and script share one working directory, as in
		// one shell, where relative paths (credentials files) resolve.
		work := t.TempDir()
		c = &coord{t: t, name: "docs coordinator", url: proc.NATSURL(ports[0]), api: "http://" + httpAddr,
			dataDir: dataDir, cwd: work}
		env := []string{"PATH=" + bin.dir + string(os.PathListSeparator) + os.Getenv("PATH")}
		baseEnv := len(env)
		for _, e := range s.env {
			env = append(env, repl.Replace(e))
			if v, ok := strings.CutPrefix(e, "FORMICA_HTTP_TOKEN="); ok {
				c.token = v
			}
		}
		if len(s.setup) > 0 {
			setup := "set -euxo pipefail\n" + repl.Replace(strings.Join(s.setup, "\n")) + "\n"
			sh := proc.StartWith(t, proc.Options{Env: env, Dir: work}, "docs setup", "bash", "-c", setup)
			if code := sh.Wait(t, runTimeout); code != 0 {
				t.Fatalf("the documentation's setup failed (exit %d)", code)
			}
		}
		started := true
		var procs []*proc.Proc
		workers := 0
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
			// replay scripted models, and the test's HTTP address where the
			// example keeps the default.
			if words[0] == "coordinator" || words[0] == "worker" {
				args = append(args, "--allow-scripted")
			}
			if words[0] == "coordinator" && !slices.Contains(args, "--http") {
				args = append(args, "--http", httpAddr)
			}
			inUse := func(p *proc.Proc, ready string) {
				if !p.AwaitLog(t, ready, readyTimeout) {
					if attempt == 3 || !strings.Contains(p.Stderr.String(), "address already in use") {
						t.Fatalf("docs: %s %v did not start (%s)", words[0], args, p.Status())
					}
					started = false
				}
			}
			switch words[0] {
			case "nats-server":
				p := proc.StartWith(t, proc.Options{Env: penv, Dir: work}, "docs nats-server", bin.natsServer, args...)
				procs = append(procs, p)
				inUse(p, "Server is ready")
			case "coordinator":
				p := proc.StartWith(t, proc.Options{Env: penv, Dir: work}, "docs coordinator", bin.coordinator, args...)
				procs = append(procs, p)
				c.p = p
				inUse(p, "coordinator ready")
			case "worker":
				p := proc.StartWith(t, proc.Options{Env: penv, Dir: work}, "docs worker", bin.worker, args...)
				procs = append(procs, p)
				p.WaitLog(t, "worker ready", readyTimeout)
				workers++
				proc.WaitUntil(t, readyTimeout, "the coordinator lists the documentation's workers", func() bool {
					var ws []struct{ ID string }
					c.getJSON("/v1/workers", &ws)
					return len(ws) >= workers
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
		sh := proc.StartWith(t, proc.Options{Env: env, Dir: work}, "docs script", "bash", "-c", script)
		if code := sh.Wait(t, 2*runTimeout); code != 0 {
			t.Fatalf("the documentation's examples failed (exit %d); the trace is in the script's stderr below\nstdout:\n%s", code, sh.Stdout.String())
		}
		if strings.Contains(sh.Stdout.String(), `{"error":`) {
			t.Errorf("an API example answered with an error:\n%s", sh.Stdout.String())
		}
		if testing.Verbose() {
			t.Logf("docs session trace:\n%s", proc.Tail(sh.Stderr.String(), 8<<10))
		}
		return sh.Stdout.String(), c
	}
	panic("unreachable")
}

// TestReadmeExamples runs the sh blocks of the pages on durable runs, the
// CLI (docs/cli.md) and the HTTP API (docs/api.md) against live processes, then checks what
// they did: every run they submitted ended as it should, both held approvals
// were answered (one allowed, one denied), and the token example was
// refused without its token.
func TestReadmeExamples(t *testing.T) {
	t.Parallel()
	sessions := readmeSessions(t, readmeDurable)
	if len(sessions) != 2 {
		t.Fatalf("%v: %d sessions (blocks that start a coordinator), want 2", readmeDurable, len(sessions))
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

// TestReadmeCLIUsage: every flag the CLI summary of docs/cli.md names is one the
// command accepts.
func TestReadmeCLIUsage(t *testing.T) {
	t.Parallel()
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	var block []string
	for _, b := range readmeBlocks(t, readmeDurable, "") {
		if len(b) > 0 && strings.HasPrefix(b[0], "formica ") {
			block = b
		}
	}
	if block == nil {
		t.Fatal("docs/cli.md: no CLI summary block")
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
				t.Errorf("docs/cli.md: formica %s %s: not in its help:\n%s", cmd, flag, help)
			}
		}
	}
}

// readmeRuns returns the runs c recorded, each once final, and fails unless
// there are want of them, all succeeded, every thread placed on a worker
// named in workers.
func readmeRuns(t *testing.T, c *coord, want int, workers ...string) []record.Run {
	t.Helper()
	var runs []record.Run
	c.call(http.StatusOK, http.MethodGet, "/v1/runs?limit=1000", nil, &runs)
	if len(runs) != want {
		t.Errorf("%d runs recorded, want %d", len(runs), want)
	}
	for i, r := range runs {
		r = c.waitFinal(r.RunID)
		runs[i] = r
		if r.Status != event.Succeeded || r.Output == "" {
			t.Errorf("run %s: %s (%s), output %q", r.RunID, r.Status, r.Error, r.Output)
		}
		for _, th := range r.Threads {
			if !slices.Contains(workers, th.Worker) {
				t.Errorf("run %s: thread %s ran on %q, want one of %v", r.RunID, th.Name, th.Worker, workers)
			}
		}
	}
	return runs
}

// TestReadmeClusterExamples runs the sh blocks of docs/cluster.md ("Run a
// cluster") as written: credentials issued from the data dir before the
// coordinator's first start, a coordinator listening beyond loopback (which
// it does only with credentials issued), a worker with its own, and
// `formica run --nats` with the client's. The run is recorded, succeeded,
// and every thread ran on the worker its credentials name.
func TestReadmeClusterExamples(t *testing.T) {
	t.Parallel()
	sessions := readmeSessions(t, readmeCluster)
	if len(sessions) != 1 || len(sessions[0].procs) != 2 {
		t.Fatalf("%v: %d sessions; want 1, with a coordinator and a worker", readmeCluster, len(sessions))
	}
	out, c := sessions[0].run(t, nil)
	runs := readmeRuns(t, c, 1, "w1")
	if len(runs) == 1 && strings.TrimSpace(out) != runs[0].Output {
		t.Errorf("formica run printed %q, want the run's output %q", out, runs[0].Output)
	}
}

// TestReadmeSecurityExamples runs the sh blocks of docs/security.md as
// written: on the embedded server, credentials handed to a worker and
// a person, the worker known by its credentials' id; on an external
// nats-server that includes the trust `coordinator creds --nats-server-conf`
// wrote, a coordinator, a worker and a client each with credentials of
// their own, and a run that succeeds on that worker.
func TestReadmeSecurityExamples(t *testing.T) {
	t.Parallel()
	sessions := readmeSessions(t, readmeSecurity)
	if len(sessions) != 2 {
		t.Fatalf("%v: %d sessions, want 2 (embedded, external NATS)", readmeSecurity, len(sessions))
	}
	t.Run("embedded", func(t *testing.T) {
		out, _ := sessions[0].run(t, nil)
		if !strings.Contains(out, "gpu-1") {
			t.Errorf("formica workers printed %q; want the worker gpu-1", out)
		}
	})
	t.Run("external NATS", func(t *testing.T) {
		out, c := sessions[1].run(t, nil)
		if runs := readmeRuns(t, c, 1, "w1"); len(runs) == 1 && strings.TrimSpace(out) != runs[0].Output {
			t.Errorf("formica run printed %q, want the run's output %q", out, runs[0].Output)
		}
	})
}
