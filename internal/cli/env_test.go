package cli

import (
	"flag"
	"sort"
	"testing"

	"github.com/formica-run/formica/internal/envflag/envflagtest"
)

// flagSetOf returns the flag set command builds, as it is before parsing.
func flagSetOf(t *testing.T, command string) *flag.FlagSet {
	t.Helper()
	got, code := commandFlagSet(command)
	if code != ExitOK {
		t.Fatalf("formica %s -h: exit %d", command, code)
	}
	if got == nil {
		t.Fatalf("formica %s builds no flag set through newFlagSet/parse", command)
	}
	return got
}

// Every flag of every subcommand, present and future, can be set from the
// environment: the commands come from the dispatch table, the flags from
// each command's own flag set.
func TestEveryFlagFromEnvironment(t *testing.T) {
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if n := envflagtest.Check(t, func() *flag.FlagSet { return flagSetOf(t, name) }); n == 0 {
				t.Fatalf("formica %s has no flags", name)
			}
		})
	}
}
