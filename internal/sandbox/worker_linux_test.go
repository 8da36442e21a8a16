package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestRootlessWorkerSandboxes: a worker that is not root (uid 65534 here)
// still sandboxes, in a user namespace of each call's own: its tools run as
// its uid and see only the view, and the worker's environment stays out of
// reach.
func TestRootlessWorkerSandboxes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the unprivileged worker")
	}
	// The test binary and the cwd where the unprivileged user can reach them.
	dir, err := os.MkdirTemp("", "formica-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, cwd := filepath.Join(dir, "sandbox.test"), filepath.Join(dir, "cwd")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.Chmod(dir, 0o755), os.WriteFile(bin, self, 0o755), os.Mkdir(cwd, 0o755), os.Chown(cwd, 65534, 65534)); err != nil {
		t.Fatal(err)
	}
	script := `id -u; echo hi > f; cat /etc/shadow; ls /home; ` +
		`cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c 'rootless-sec''ret'; ` +
		`grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status; exec 3<>/dev/tcp/127.0.0.1/1 || echo no-network`
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{envTestWorker + "=" + cwd, "SANDBOX_TEST_SCRIPT=" + script, "OPENAI_API_KEY=sk-rootless-secret", "PATH=/usr/bin:/bin"}
	cmd.Dir = cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	got := string(out)
	if err != nil || !strings.Contains(got, "err <nil>") {
		t.Fatalf("rootless worker: %v\n%s", err, got)
	}
	for _, want := range []string{`output "65534\n`, "/etc/shadow: No such file", "/home", `\n0\n`, "no-network",
		`CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000`} {
		if !strings.Contains(got, want) {
			t.Errorf("rootless call output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "sk-rootless-secret") {
		t.Errorf("the call read the worker's environment:\n%s", got)
	}
	fi, err := os.Stat(filepath.Join(cwd, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 {
		t.Errorf("f owned by uid %d, want the worker's 65534", st.Uid)
	}
}
