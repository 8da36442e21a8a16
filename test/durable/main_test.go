// Package durable_test runs Formica's durable-run features as a user meets
// them: a coordinator process with its embedded NATS server and JetStream
// store, worker processes, the formica CLI and the HTTP API, all on
// loopback. It kills the coordinator with SIGKILL mid-flight and restarts
// it on the same data directory, submits the same run twice, resumes event
// streams, holds tool calls for approval, sends results larger than a NATS
// message, cancels runs, and runs the documented examples (docs/).
//
// The binaries are built once, by TestMain, without the race detector
// (proc.Build). Each test starts its own processes, kills every one of them on
// cleanup and shows their stderr when it fails; every wait is bounded.
// Timings are short: heartbeats of 200ms and a queue AckWait of 2s.
package durable_test

import (
	"flag"
	"os"
	"testing"

	"github.com/formica-run/formica/test/proc"
)

// Binaries built by TestMain.
var bin struct{ dir, coordinator, worker, formica, natsServer string }

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	flag.Parse()
	pkgs := []string{"./cmd/coordinator", "./cmd/worker", "./cmd/formica",
		// The NATS server as its own process, for the documented external cluster.
		"github.com/nats-io/nats-server/v2"}
	return proc.RunBuilt(m, "durable test", pkgs, func(_, dir string, bins map[string]string) {
		bin.dir, bin.coordinator, bin.worker, bin.formica = dir, bins["coordinator"], bins["worker"], bins["formica"]
		bin.natsServer = bins["nats-server"]
	})
}
