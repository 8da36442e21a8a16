// Package scale_test runs Formica at the sizes its ceilings allow when
// raised: a real NATS server process with JetStream, a coordinator process
// on it and worker processes, all on loopback, the sim model, one run of
// 10,000 helpers. It checks what the processes report of their own memory
// against the figures BENCHMARKS.md records.
//
// The binaries are built once, by TestMain, without the race detector
// (proc.Build), as a deployment runs them: the race detector would
// multiply a process's memory and slow it several times.
package scale_test

import (
	"flag"
	"os"
	"testing"

	"github.com/formica-run/formica/test/proc"
)

// Binaries built by TestMain.
var bin struct{ coordinator, worker, nats string }

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // the tests skip themselves
	}
	pkgs := []string{"./cmd/coordinator", "./cmd/worker", "github.com/nats-io/nats-server/v2"}
	return proc.RunBuilt(m, "scale test", pkgs, func(_, _ string, bins map[string]string) {
		bin.coordinator, bin.worker, bin.nats = bins["coordinator"], bins["worker"], bins["nats-server"]
	})
}
