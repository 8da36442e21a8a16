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
	"path/filepath"
	"testing"

	tproc "github.com/formica-run/formica/test/proc"
)

// Binaries built by TestMain (with -race when this test binary has it).
var bin struct{ coordinator, worker, formica string }

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
	log := &tproc.Output{}
	bins, err := tproc.Build(root, dir, log, "./cmd/coordinator", "./cmd/worker", "./cmd/formica")
	if err != nil || testing.Verbose() {
		fmt.Fprint(os.Stderr, log.String())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster test: build binaries:", err)
		return 1
	}
	bin.coordinator, bin.worker, bin.formica = bins["coordinator"], bins["worker"], bins["formica"]
	return m.Run()
}
