// Package envflagtest checks that every flag of a program can be set from
// the environment. It works from the program's own flag set, so a flag
// added later is checked without touching the test.
package envflagtest

import (
	"flag"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/envflag"
)

// candidates are tried in order for a value the flag accepts.
var candidates = []string{"7", "3s", "nats://127.0.0.1:7", "env-value", "0", "1G"}

// recorder wraps a flag's value and records every Set, so the check works
// for values whose String says nothing (flag.Func).
type recorder struct {
	flag.Value
	sets []string
}

func (r *recorder) Set(s string) error {
	r.sets = append(r.sets, s)
	return r.Value.Set(s)
}

func (r *recorder) IsBoolFlag() bool {
	b, ok := r.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Check runs, for every flag of the sets newFS builds (each call must build
// a fresh set with fresh variables), subtests proving that its variable
// sets it, that the command line beats the variable, that its own variable
// beats an alias, that --help names the variable, and that flags without a
// variable (--version) ignore the environment. It returns how many flags it
// checked, so a caller can assert that its set is not empty.
func Check(t *testing.T, newFS func() *flag.FlagSet) int {
	t.Helper()
	n := 0
	newFS().VisitAll(func(f *flag.Flag) {
		n++
		t.Run(f.Name, func(t *testing.T) { checkFlag(t, newFS, f.Name) })
	})
	return n
}

func checkFlag(t *testing.T, newFS func() *flag.FlagSet, name string) {
	vals := accepted(newFS, name)
	if len(vals) == 0 {
		t.Fatalf("--%s accepts none of %q; extend envflagtest's candidates", name, candidates)
	}
	val := vals[0]
	vars := envflag.Vars(name)
	if len(vars) == 0 {
		if sets := parse(t, newFS, name, nil, map[string]string{envflag.Name(name): val}); len(sets) != 0 {
			t.Fatalf("--%s has no variable, yet $%s set it to %q", name, envflag.Name(name), sets)
		}
		return
	}
	for _, v := range vars {
		if sets := parse(t, newFS, name, nil, map[string]string{v: val}); len(sets) != 1 || sets[0] != val {
			t.Errorf("$%s=%q: --%s was set %q, want once to %q", v, val, name, sets, val)
		}
	}
	// The flag on the command line wins: the variable sets nothing more.
	if sets := parse(t, newFS, name, []string{"--" + name + "=" + val}, map[string]string{vars[0]: val}); len(sets) != 1 {
		t.Errorf("--%s given and $%s set: the flag was set %q, want only by the command line", name, vars[0], sets)
	}
	// The own variable beats an alias.
	if len(vars) > 1 && len(vals) > 1 {
		env := map[string]string{vars[0]: vals[0]}
		for _, alias := range vars[1:] {
			env[alias] = vals[1]
		}
		if sets := parse(t, newFS, name, nil, env); len(sets) != 1 || sets[0] != vals[0] {
			t.Errorf("$%s and its aliases set: --%s was set %q, want once to $%s's %q", vars[0], name, sets, vars[0], vals[0])
		}
	}
	fs := newFS()
	envflag.Annotate(fs)
	if usage := fs.Lookup(name).Usage; !strings.Contains(usage, "$"+vars[0]) {
		t.Errorf("--%s usage %q does not name $%s", name, usage, vars[0])
	}
}

// accepted are the candidate values the flag takes.
func accepted(newFS func() *flag.FlagSet, name string) []string {
	cands := candidates
	if (&recorder{Value: newFS().Lookup(name).Value}).IsBoolFlag() {
		cands = []string{"true", "false"}
	}
	var ok []string
	for _, c := range cands {
		if newFS().Set(name, c) == nil {
			ok = append(ok, c)
		}
	}
	return ok
}

// parse parses args into a fresh set, applies env, and returns what the
// flag called name was set to.
func parse(t *testing.T, newFS func() *flag.FlagSet, name string, args []string, env map[string]string) []string {
	t.Helper()
	fs := newFS()
	f := fs.Lookup(name)
	rec := &recorder{Value: f.Value}
	f.Value = rec
	envflag.Annotate(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := envflag.Apply(fs, lookup); err != nil {
		t.Fatalf("apply %v: %v", env, err)
	}
	return rec.sets
}
