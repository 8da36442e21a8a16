// Command worker is Formica's worker (see internal/roles/workercmd); the formica
// binary also runs it when invoked under the name worker.
package main

import "github.com/formica-run/formica/internal/roles/workercmd"

func main() { workercmd.Main() }
