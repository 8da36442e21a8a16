// Package scale_test runs Formica at the sizes its ceilings allow when
// raised: a real NATS server process with JetStream, a coordinator process
// on it and worker processes, all on loopback, the sim model, one run of
// 10,000 helpers. It checks what the processes report of their own memory
// against the figures BENCHMARKS.md records.
//
// The binaries are built once, by TestMain, without the race detector even
// when the tests have it: the race detector multiplies a process's memory
// (its shadow memory and larger goroutine stacks) and slows it several
// times, and neither is what a deployment runs. The test binary itself may
// still be built with -race.
package scale_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
	dir, err := os.MkdirTemp("", "formica-scale-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale test:", err)
		return 1
	}
	log := &proc.Output{}
	bins, err := proc.BuildNoRace(root, dir, log, "./cmd/coordinator", "./cmd/worker", "github.com/nats-io/nats-server/v2")
	if err != nil || testing.Verbose() {
		fmt.Fprint(os.Stderr, log.String())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale test: build binaries:", err)
		return 1
	}
	bin.coordinator, bin.worker, bin.nats = bins["coordinator"], bins["worker"], bins["nats-server"]
	return m.Run()
}
