package proc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Marker is a unique `sleep` argument (a number of seconds no other process
// uses), so a test can find its sleeper among the host's processes whatever
// PID namespace it runs in.
func Marker() string {
	return fmt.Sprintf("%d.%06d", 900+rand.IntN(100), rand.IntN(1000000))
}

// WithArg maps the pid of every live host process that has arg among its
// arguments to its state letter (R, S, T, ...); zombies are left out.
func WithArg(arg string) map[int]byte {
	out := map[int]byte{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte("\x00"+arg+"\x00")) {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 || i+2 >= len(stat) {
			continue
		}
		if st := stat[i+2]; st != 'Z' && st != 'X' {
			var pid int
			fmt.Sscan(filepath.Base(d), &pid)
			out[pid] = st
		}
	}
	return out
}

// WaitNoArg polls, bounded by timeout, until no host process has arg; it
// fails the test and kills them if some remain.
func WaitNoArg(t testing.TB, arg string, timeout time.Duration) {
	t.Helper()
	if WaitArg(timeout, arg, func(m map[int]byte) bool { return len(m) == 0 }) {
		return
	}
	left := WithArg(arg)
	t.Errorf("processes %v (argument %s) still run after %v", left, arg, timeout)
	for pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// WaitArg polls, bounded by timeout, until ok holds for WithArg(arg).
func WaitArg(timeout time.Duration, arg string, ok func(map[int]byte) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if ok(WithArg(arg)) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
