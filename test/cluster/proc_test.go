package cluster_test

import (
	"os/exec"
	"testing"
	"time"

	tproc "github.com/formica-run/formica/test/proc"
)

// Bounds of the waits on processes.
const (
	readyTimeout = 30 * time.Second // a process logs that it is ready
	runTimeout   = 90 * time.Second // a `formica run` ends
)

// Heartbeats of the processes under test. A worker silent for three of its
// heartbeats is presumed lost; tests that lose workers on purpose give them
// fastHeartbeat, the others leave room for a machine busy with -race.
const (
	workerHeartbeat = "500ms"
	fastHeartbeat   = "250ms"
	coordHeartbeat  = "500ms"
)

// proc is one process under test: a test/proc process (started with a
// clean environment, killed on cleanup, its stderr shown when the test
// fails) under the names this package's tests use.
type proc struct {
	*tproc.Proc
	name           string
	cmd            *exec.Cmd
	stdout, stderr *tproc.Output
}

// start starts bin; see tproc.Start.
func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := tproc.Start(t, name, bin, args...)
	return &proc{Proc: p, name: p.Name, cmd: p.Cmd, stdout: &p.Stdout, stderr: &p.Stderr}
}

func (p *proc) exited() bool   { return p.Exited() }
func (p *proc) status() string { return p.Status() }

// kill sends SIGKILL (a no-op once it has exited) and reaps it, bounded.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.Kill(t)
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	return p.Wait(t, timeout)
}

// waitLog waits until the process's stderr contains text, failing the test if
// the process exits first or the wait times out.
func (p *proc) waitLog(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	p.WaitLog(t, text, timeout)
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	return tproc.FreePorts(t, n)
}

func natsURL(port int) string { return tproc.NATSURL(port) }

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tproc.WaitUntil(t, timeout, what, cond)
}
