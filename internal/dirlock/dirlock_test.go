package dirlock_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/dirlock"
)

const childEnv = "DIRLOCK_TEST_CHILD_DIR"

// TestMain lets the test binary act as a second process trying the lock:
// flock locks belong to open file descriptions, so only another process
// (or another open) shows the refusal a second coordinator sees.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		l, err := dirlock.Acquire(dir)
		if err != nil {
			fmt.Println(err)
			if errors.Is(err, dirlock.ErrLocked) {
				os.Exit(3)
			}
			os.Exit(1)
		}
		l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func tryInChild(t *testing.T, dir string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestSecondHolderRefusedAndNamed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	code, out := tryInChild(t, dir)
	if code != 3 {
		t.Fatalf("second process: exit %d (%s), want the lock refused", code, out)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("pid %d on host %s", os.Getpid(), host)
	if !strings.Contains(out, want) || !strings.Contains(out, "data directory in use") {
		t.Fatalf("refusal %q does not name the holder %q", out, want)
	}
	// In the same process, a second open is refused too.
	if _, err := dirlock.Acquire(dir); !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("second Acquire in process: %v, want ErrLocked", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if code, out := tryInChild(t, dir); code != 0 {
		t.Fatalf("after release: exit %d (%s), want the lock taken", code, out)
	}
}

func TestReleasedWhenHolderDies(t *testing.T) {
	// A child that took the lock and exited (as a crash would) leaves it free.
	dir := t.TempDir()
	if code, out := tryInChild(t, dir); code != 0 {
		t.Fatalf("child: exit %d (%s)", code, out)
	}
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("lock after the holder exited: %v", err)
	}
	l.Release()
}
