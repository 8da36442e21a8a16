// Package cluster_test runs Formica as a real cluster: a coordinator, worker
// processes and the formica CLI, built once from cmd/ and talking over
// loopback TCP on ports the tests pick. Each test starts its own processes,
// kills every one of them on cleanup and dumps their stderr when it fails;
// every wait is bounded.
//
// Heartbeats are short (500ms, 250ms for workers a test kills) so a lost
// worker is noticed within a second or two, while a busy CI machine still
// has room to schedule a heartbeat before three of them are missed.
//
// A worker that is only slow can still be presumed lost. Its coordinator
// then places the thread again elsewhere while the first placement runs on
// (nothing fences it) and reports its own end, so checks that count thread
// ends, refusals or records are skipped, with a log line, when a worker
// came back after being declared lost; the run's outcome is still checked.
package cluster_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Binaries built by TestMain.
var bin struct{ coordinator, worker, formica string }

// raceEnabled is set when this test binary is built with -race; the
// processes under test are then built with it too.
var raceEnabled bool

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "formica-cluster-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster test:", err)
		return 1
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/coordinator", "./cmd/worker", "./cmd/formica")
	t0 := time.Now()
	build := exec.Command("go", args...)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster test: build binaries:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "cluster test: built binaries (race %v) in %s\n", raceEnabled, time.Since(t0).Round(time.Millisecond))
	}
	bin.coordinator = filepath.Join(dir, "coordinator")
	bin.worker = filepath.Join(dir, "worker")
	bin.formica = filepath.Join(dir, "formica")
	return m.Run()
}
