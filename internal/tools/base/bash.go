package base

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/formica-run/formica/internal/sandbox"
)

const bashDesc = "Run a shell command with `bash -c` in the working directory and return its " +
	"stdout and stderr combined (long output keeps its start and end). A non-zero exit code is " +
	"reported on the last line. The command is killed, with every process it started, when it " +
	"times out or finishes: background processes do not outlive the call. The environment is " +
	"minimal: PATH, a fresh temporary HOME and TMPDIR, LANG, TERM=dumb."

var bashParams = []param{
	{name: "command", typ: "string", required: true, nonEmpty: true, desc: "The shell command line to run."},
	{name: "timeout_ms", typ: "integer", positive: true,
		desc: "Timeout in milliseconds; the harness sets the default and caps the maximum."},
}

// waitDelay bounds how long Run waits for processes that still hold the
// output pipe after the shell has exited or been killed.
const waitDelay = time.Second

// defaultPath is bash's PATH when this process has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

type bashTool struct{ tool }

func (t *bashTool) Subject(args json.RawMessage) string {
	return strings.TrimSpace(stringField(args, "command"))
}

// Run runs the command and returns its output. A non-zero exit status and a
// timeout are results, not errors: the output so far is worth showing. An
// error means the command could not run or ctx ended (the call is
// abandoned; the error wraps context.Cause(ctx)).
func (t *bashTool) Run(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Command   string `json:"command"`
		TimeoutMS int64  `json:"timeout_ms"`
	}
	if err := decode(args, t.params, &a); err != nil {
		return "", err
	}
	timeout := t.h.BashTimeout
	if a.TimeoutMS > 0 {
		timeout = t.h.BashMaxTimeout
		if a.TimeoutMS < int64(t.h.BashMaxTimeout/time.Millisecond) {
			timeout = time.Duration(a.TimeoutMS) * time.Millisecond
		}
	}
	shell, err := findShell()
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("bash: not started: %w", context.Cause(ctx))
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &capBuffer{limit: t.h.OutputCap}
	run := t.h.runPlain
	if t.h.Sandbox != nil {
		run = t.h.runSandboxed
	}
	end, err := run(runCtx, shell, a.Command, out)
	if ctx.Err() != nil {
		return "", fmt.Errorf("bash: command killed: %w", context.Cause(ctx))
	}
	if err != nil {
		return "", err
	}

	var note string
	switch {
	case end.Killed && runCtx.Err() != nil:
		note = fmt.Sprintf("[timed out after %v; the command and its child processes were killed]", timeout)
	case end.Code > 0:
		note = fmt.Sprintf("[exit code: %d]", end.Code)
	case end.Signal != 0:
		note = fmt.Sprintf("[terminated by signal: %v]", end.Signal)
	case end.Code != 0:
		note = "[terminated by a signal]"
	}
	res := out.String()
	switch {
	case note == "" && res == "":
		return "(no output)", nil
	case note == "":
		return res, nil
	case res != "" && !strings.HasSuffix(res, "\n"):
		res += "\n"
	}
	return res + note, nil
}

// runSandboxed runs the command in the sandbox: HOME and TMPDIR are its
// private /tmp.
func (h *harness) runSandboxed(ctx context.Context, shell, command string, out io.Writer) (sandbox.Exit, error) {
	exit, err := h.Sandbox.Run(ctx, sandbox.Request{
		Dir: h.root, Argv: []string{shell, "-c", command}, Env: h.env("/tmp"),
		Network: h.Network, Limits: h.Limits,
	}, out)
	if err != nil {
		return sandbox.Exit{}, fmt.Errorf("bash: %w", err)
	}
	return exit, nil
}

// runPlain runs the command unconfined, in its own process group, with a
// fresh temporary HOME.
func (h *harness) runPlain(ctx context.Context, shell, command string, out io.Writer) (sandbox.Exit, error) {
	home, err := os.MkdirTemp("", "formica-bash-")
	if err != nil {
		return sandbox.Exit{}, fmt.Errorf("bash: temporary HOME: %w", err)
	}
	defer removeTree(home)
	cmd := exec.CommandContext(ctx, shell, "-c", command)
	cmd.Dir = h.root
	cmd.Env = h.env(home)
	cmd.Stdout, cmd.Stderr = out, out // same writer: exec serialises writes
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return sandbox.Exit{}, fmt.Errorf("bash: start %s: %w", shell, err)
	}
	waitErr := cmd.Wait()
	_ = killGroup(cmd.Process.Pid) // reap background children left behind
	state := cmd.ProcessState
	if state == nil {
		return sandbox.Exit{}, fmt.Errorf("bash: %w", waitErr)
	}
	timedOut := ctx.Err() != nil && !state.Exited()
	var exitErr *exec.ExitError
	if waitErr != nil && !timedOut && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return sandbox.Exit{}, fmt.Errorf("bash: %w", waitErr)
	}
	e := sandbox.Exit{Code: state.ExitCode(), Killed: timedOut}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
	}
	return e, nil
}

// killGroup SIGKILLs the process group led by pid.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// env is bash's minimal environment, sorted: PATH, HOME and TMPDIR (home),
// LANG and LC_ALL, TERM, then the PassEnv names set in this process.
func (h *harness) env(home string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	m := map[string]string{
		"PATH": path, "HOME": home, "TMPDIR": home,
		"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb",
	}
	for _, name := range h.PassEnv {
		if v, ok := os.LookupEnv(name); ok {
			m[name] = v
		}
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// findShell locates bash, or sh when there is no bash, once.
var findShell = sync.OnceValues(func() (string, error) {
	for _, name := range []string{"bash", "sh"} {
		if p, err := exec.LookPath(name); err == nil && filepath.IsAbs(p) {
			return p, nil
		}
	}
	for _, p := range []string{"/bin/bash", "/bin/sh"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("bash: neither bash nor sh found")
})

// removeTree removes dir, making read-only directories (a Go module cache
// makes them) writable first when a plain RemoveAll fails.
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
