package main

import (
	"flag"
	"testing"

	"github.com/formica-run/formica/internal/envflag/envflagtest"
)

// Every coordinator flag, present and future, can be set from the
// environment.
func TestEveryFlagFromEnvironment(t *testing.T) {
	if n := envflagtest.Check(t, func() *flag.FlagSet { fs, _ := newFlags(); return fs }); n < 20 {
		t.Fatalf("checked only %d flags", n)
	}
}
