// Package deploy_test runs Formica's binaries the way an orchestrator does:
// configured from the environment, started in any order, probed through
// their healthcheck command, stopped with SIGTERM. Each test starts its own
// processes on loopback ports it picks and kills them on cleanup; every
// wait is bounded. compose_test.go brings the whole compose stack up with
// podman when it is installed.
package deploy_test

import (
	"flag"
	"os"
	"testing"

	tproc "github.com/formica-run/formica/test/proc"
)

// Binaries built by TestMain, without the race detector (proc.Build).
var bin struct{ coordinator, worker, formica string }

// root is the module root.
var root string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	flag.Parse()
	pkgs := []string{"./cmd/coordinator", "./cmd/worker", "./cmd/formica"}
	return tproc.RunBuilt(m, "deploy test", pkgs, func(r, _ string, bins map[string]string) {
		root = r
		bin.coordinator, bin.worker, bin.formica = bins["coordinator"], bins["worker"], bins["formica"]
	})
}
