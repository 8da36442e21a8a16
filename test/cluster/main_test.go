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
	"os"
	"testing"

	tproc "github.com/formica-run/formica/test/proc"
)

// Binaries built by TestMain, without the race detector (proc.Build).
var bin struct{ coordinator, worker, formica string }

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	flag.Parse()
	pkgs := []string{"./cmd/coordinator", "./cmd/worker", "./cmd/formica"}
	return tproc.RunBuilt(m, "cluster test", pkgs, func(_, _ string, bins map[string]string) {
		bin.coordinator, bin.worker, bin.formica = bins["coordinator"], bins["worker"], bins["formica"]
	})
}
