// Package proc runs the processes of multi-process tests: the Formica
// binaries built once per test binary (Build), each started with a clean
// environment (Start), its output captured, killed on the test's cleanup,
// and its stderr shown when the test fails. Every wait is bounded.
package proc

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// KillTimeout bounds the reaping of a killed process.
const KillTimeout = 10 * time.Second

// DumpBytes is how much of a process's stderr a failing test shows.
const DumpBytes = 24 << 10

// Output is a process's captured stream, safe to read while it is written.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Proc is one process under test.
type Proc struct {
	Name   string
	Cmd    *exec.Cmd
	Stdout Output
	Stderr Output
	done   chan struct{} // closed once the process has exited
	err    error         // Wait's result, set before done closes
}

// Options are the optional settings of StartWith.
type Options struct {
	// Env is added to the clean environment (PATH, a private HOME, GORACE);
	// a variable given here replaces the clean one.
	Env []string
	// Dir is the working directory; empty: a fresh temporary directory.
	Dir string
	// Stdin is the standard input; nil: empty.
	Stdin io.Reader
}

// Start starts bin with a clean environment; see StartWith.
func Start(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	return StartWith(t, Options{}, name, bin, args...)
}

// StartWith starts bin and registers its cleanup: kill it if it still runs,
// fail on a data race it reported, and show its stderr if the test failed.
// The environment holds no provider keys and no FORMICA_* variable unless
// opts.Env adds them.
func StartWith(t testing.TB, opts Options, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GORACE=" + os.Getenv("GORACE")}, opts.Env...)
	p.Cmd.Dir = opts.Dir
	if p.Cmd.Dir == "" {
		p.Cmd.Dir = t.TempDir()
	}
	p.Cmd.Stdin = opts.Stdin
	p.Cmd.Stdout, p.Cmd.Stderr = &p.Stdout, &p.Stderr
	p.Cmd.SysProcAttr = procAttr()
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill(t)
		if strings.Contains(p.Stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", name)
		}
		if t.Failed() {
			t.Logf("---- %s (pid %d) %s; stderr (last %d KiB) ----\n%s", name, p.Cmd.Process.Pid, p.Status(), DumpBytes>>10, Tail(p.Stderr.String(), DumpBytes))
		}
	})
	return p
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Status says whether the process runs or how it ended.
func (p *Proc) Status() string {
	if !p.Exited() {
		return "running"
	}
	if p.err == nil {
		return "exited 0"
	}
	return p.err.Error()
}

// Kill sends SIGKILL (a no-op once it has exited) and reaps it, bounded.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	if p.Exited() {
		return
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill %s: %v", p.Name, err)
	}
	select {
	case <-p.done:
	case <-time.After(KillTimeout):
		t.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.Name, p.Cmd.Process.Pid, KillTimeout)
	}
}

// Wait waits for the process to exit and returns its exit code, failing the
// test after timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.Name, timeout)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("%s: %v", p.Name, p.err)
	return -1
}

// WaitLog waits until the process's stderr contains text, failing the test if
// the process exits first or the wait times out.
func (p *Proc) WaitLog(t testing.TB, text string, timeout time.Duration) {
	t.Helper()
	if !p.AwaitLog(t, text, timeout) {
		t.Fatalf("%s exited (%s) before logging %q", p.Name, p.Status(), text)
	}
}

// AwaitLog is WaitLog that returns false instead of failing when the
// process exits first (a start that lost its port, say).
func (p *Proc) AwaitLog(t testing.TB, text string, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Stderr.String(), text) {
		if p.Exited() {
			// It may have logged just before it exited.
			return strings.Contains(p.Stderr.String(), text)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v", p.Name, text, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Tail is the last n bytes of s, marked as cut when it is.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
