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

// candidates are tried in order until one is accepted by the flag and
// differs from its default.
var candidates = []string{"7", "3s", "nats://127.0.0.1:7", "env-value", "0"}

// Check runs, for every flag of the sets newFS builds (each call must build
// a fresh set with fresh variables), subtests proving that its variable
// sets it, that the command line beats the variable, that --help names the
// variable, and that flags without a variable (--version) ignore the
// environment. It returns how many flags it checked, so a caller can assert
// that its set is not empty.
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
	vars := envflag.Vars(name)
	val, want := valueFor(t, newFS, name)
	if len(vars) == 0 {
		fs := parse(t, newFS, nil, map[string]string{envflag.Name(name): val})
		if got, def := fs.Lookup(name).Value.String(), fs.Lookup(name).DefValue; got != def {
			t.Fatalf("--%s has no variable, yet $%s set it to %q", name, envflag.Name(name), got)
		}
		return
	}
	for _, v := range vars {
		fs := parse(t, newFS, nil, map[string]string{v: val})
		if got := fs.Lookup(name).Value.String(); got != want {
			t.Errorf("$%s=%q: --%s = %q, want %q", v, val, name, got, want)
		}
	}
	// The flag given on the command line, even as its default, wins.
	def := newFS().Lookup(name).DefValue
	fs := parse(t, newFS, []string{"--" + name + "=" + def}, map[string]string{vars[0]: val})
	if got := fs.Lookup(name).Value.String(); got != def {
		t.Errorf("--%s=%q and $%s=%q: got %q, want the flag's %q", name, def, vars[0], val, got, def)
	}
	// The own variable beats an alias.
	if len(vars) > 1 {
		env := map[string]string{vars[0]: val}
		for _, alias := range vars[1:] {
			env[alias] = def
		}
		if got := parse(t, newFS, nil, env).Lookup(name).Value.String(); got != want {
			t.Errorf("$%s and aliases: --%s = %q, want %q from $%s", vars[0], name, got, want, vars[0])
		}
	}
	fs = newFS()
	envflag.Annotate(fs)
	if usage := fs.Lookup(name).Usage; !strings.Contains(usage, "$"+vars[0]) {
		t.Errorf("--%s usage %q does not name $%s", name, usage, vars[0])
	}
}

// valueFor finds a value the flag accepts that differs from its default,
// and what the flag then reads back.
func valueFor(t *testing.T, newFS func() *flag.FlagSet, name string) (string, string) {
	f := newFS().Lookup(name)
	cands := candidates
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		cands = []string{"true", "false"}
	}
	for _, c := range cands {
		fs := newFS()
		if err := fs.Set(name, c); err != nil {
			continue
		}
		if got := fs.Lookup(name).Value.String(); got != f.DefValue {
			return c, got
		}
	}
	t.Fatalf("--%s: none of %q is accepted and differs from the default %q; extend envflagtest's candidates", name, cands, f.DefValue)
	return "", ""
}

func parse(t *testing.T, newFS func() *flag.FlagSet, args []string, env map[string]string) *flag.FlagSet {
	t.Helper()
	fs := newFS()
	envflag.Annotate(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := envflag.Apply(fs, lookup); err != nil {
		t.Fatalf("apply %v: %v", env, err)
	}
	return fs
}
