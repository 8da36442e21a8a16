package cluster_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bounds of the waits on processes.
const (
	readyTimeout = 30 * time.Second // a process logs that it is ready
	runTimeout   = 90 * time.Second // a `formica run` ends
	killTimeout  = 10 * time.Second // a killed process is reaped
)

// Heartbeats of the processes under test. A worker silent for three of its
// heartbeats is presumed lost; tests that lose workers on purpose give them
// fastHeartbeat, the others leave room for a machine busy with -race.
const (
	workerHeartbeat = "500ms"
	fastHeartbeat   = "250ms"
	coordHeartbeat  = "500ms"
)

// dumpBytes is how much of a process's stderr a failing test shows.
const dumpBytes = 24 << 10

// output is a process's captured stream, safe to read while it is written.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// proc is one process under test.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout output
	stderr output
	done   chan struct{} // closed once the process has exited
	err    error         // Wait's result, set before done closes
}

// start starts bin and registers its cleanup: kill it if it still runs,
// fail on a data race it reported, and show its stderr if the test failed.
func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	// A clean environment: no provider keys, no FORMICA_MODEL, a private HOME.
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GORACE=" + os.Getenv("GORACE")}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = procAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", name)
		}
		if t.Failed() {
			t.Logf("---- %s (pid %d) %s; stderr (last %d KiB) ----\n%s", name, p.cmd.Process.Pid, p.status(), dumpBytes>>10, tail(p.stderr.String(), dumpBytes))
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) status() string {
	if !p.exited() {
		return "running"
	}
	if p.err == nil {
		return "exited 0"
	}
	return p.err.Error()
}

// kill sends SIGKILL (a no-op once it has exited) and reaps it, bounded.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if p.exited() {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(killTimeout):
		t.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.name, p.cmd.Process.Pid, killTimeout)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

// waitLog waits until the process's stderr contains text, failing the test if
// the process exits first or the wait times out.
func (p *proc) waitLog(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.stderr.String(), text) {
		if p.exited() {
			t.Fatalf("%s exited (%s) before logging %q", p.name, p.status(), text)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v", p.name, text, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// freePorts returns n distinct loopback ports that were free a moment ago:
// each is listened on, then all are released together.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("reserve a port: %v", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func natsURL(port int) string { return fmt.Sprintf("nats://127.0.0.1:%d", port) }

// waitUntil polls cond every 10ms until it holds, failing with what after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
