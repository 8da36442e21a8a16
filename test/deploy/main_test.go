// Package deploy_test runs Formica's binaries the way an orchestrator does:
// configured from the environment, started in any order, probed through
// their healthcheck command, stopped with SIGTERM. Each test starts its own
// processes on loopback ports it picks and kills them on cleanup; every
// wait is bounded. compose_test.go brings the whole compose stack up with
// podman when it is installed.
package deploy_test

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

// root is the module root.
var root string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "formica-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if root, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, "deploy test:", err)
		return 1
	}
	log := &tproc.Output{}
	bins, err := tproc.Build(root, dir, log, "./cmd/coordinator", "./cmd/worker", "./cmd/formica")
	if err != nil || testing.Verbose() {
		fmt.Fprint(os.Stderr, log.String())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy test: build binaries:", err)
		return 1
	}
	bin.coordinator, bin.worker, bin.formica = bins["coordinator"], bins["worker"], bins["formica"]
	return m.Run()
}
