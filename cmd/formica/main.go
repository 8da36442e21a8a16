// Command formica is the Formica client: it runs a task with helper agents
// (`formica run`) and, in a cluster, talks to the coordinator.
//
// It is also the image's one binary for every role, chosen by the name it
// is run under: as coordinator or worker (links to it) it is that command,
// and as sh it stands in for /bin/sh -c in an image that has no shell, so
// compose healthchecks run (internal/roles/execsh).
package main

import (
	"os"
	"path/filepath"

	"github.com/formica-run/formica/internal/cli"
	"github.com/formica-run/formica/internal/roles/coordinatorcmd"
	"github.com/formica-run/formica/internal/roles/execsh"
	"github.com/formica-run/formica/internal/roles/workercmd"
)

func main() {
	switch filepath.Base(os.Args[0]) {
	case "coordinator":
		coordinatorcmd.Main()
		return
	case "worker":
		workercmd.Main()
		return
	case "sh":
		os.Exit(execsh.Main(os.Args[1:], os.Stderr))
	}
	os.Exit(cli.Main(os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
