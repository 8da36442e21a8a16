package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/formica-run/formica/test/proc"
)

// A test binary started with envTestWorker acts as a worker running one
// sandboxed command ($SANDBOX_TEST_SCRIPT in that directory), so a test can
// stop and kill a worker in the middle of a call.
const envTestWorker = "SANDBOX_TEST_WORKER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envTestWorker); dir != "" {
		os.Exit(testWorker(dir, os.Getenv("SANDBOX_TEST_SCRIPT")))
	}
	os.Exit(m.Run())
}

func testWorker(dir, script string) int {
	s, err := New(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var out bytes.Buffer
	exit, err := s.Run(context.Background(), Request{Dir: dir, Argv: []string{"/bin/bash", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}}, &out)
	fmt.Printf("exit %+v, err %v, output %q\n", exit, err, out.String())
	return 0
}

// startWorker starts a test worker running script in dir and waits until
// the call's sleep (argument marker) runs.
func startWorker(t *testing.T, dir, script, marker string) *proc.Proc {
	t.Helper()
	newSandbox(t) // skip where none can be made
	w := proc.StartWith(t, proc.Options{Env: []string{envTestWorker + "=" + dir, "SANDBOX_TEST_SCRIPT=" + script}},
		"worker", os.Args[0], "-test.run=^$")
	if !proc.WaitArg(20*time.Second, marker, func(m map[int]byte) bool { return len(m) > 0 }) {
		t.Fatalf("the call's sleep %s never ran; worker %s", marker, w.Status())
	}
	return w
}

func allState(want bool, state byte) func(map[int]byte) bool {
	return func(m map[int]byte) bool {
		for _, st := range m {
			if (st == state) != want {
				return false
			}
		}
		return len(m) > 0
	}
}

func TestAttackToolOutlivesKilledWorker(t *testing.T) {
	dir, marker := t.TempDir(), proc.Marker()
	w := startWorker(t, dir, fmt.Sprintf("setsid sleep %s & sleep %s; echo x >> f", marker, marker), marker)
	if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.WaitNoArg(t, marker, 5*time.Second)
	if _, err := os.Stat(filepath.Join(dir, "f")); err == nil {
		t.Error("the killed worker's command wrote f")
	}
}

func TestAttackToolRunsOnWhileWorkerFrozen(t *testing.T) {
	dir, marker := t.TempDir(), proc.Marker()
	w := startWorker(t, dir, fmt.Sprintf("setsid sleep %s & sleep %s", marker, marker), marker)
	if err := w.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !proc.WaitArg(5*time.Second, marker, allState(true, 'T')) {
		t.Errorf("worker stopped, its tool processes are not: %v", proc.WithArg(marker))
	}
	if err := w.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !proc.WaitArg(5*time.Second, marker, allState(false, 'T')) {
		t.Errorf("worker continued, its tool processes did not: %v", proc.WithArg(marker))
	}
	_ = w.Cmd.Process.Signal(syscall.SIGKILL)
	proc.WaitNoArg(t, marker, 5*time.Second)
}
