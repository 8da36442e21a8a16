// Command coordinator is Formica's coordinator (see internal/roles/coordinatorcmd); the formica
// binary also runs it when invoked under the name coordinator.
package main

import "github.com/formica-run/formica/internal/roles/coordinatorcmd"

func main() { coordinatorcmd.Main() }
