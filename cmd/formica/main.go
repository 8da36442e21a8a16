// Command formica is the Formica client: it runs a task with helper agents
// (`formica run`) and, in a cluster, talks to the coordinator.
package main

import (
	"os"

	"github.com/formica-run/formica/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
