package workercmd

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/envflag/envflagtest"
)

// Every worker flag, present and future, can be set from the
// environment.
func TestEveryFlagFromEnvironment(t *testing.T) {
	if n := envflagtest.Check(t, func() *flag.FlagSet { fs, _ := newFlags(); return fs }); n < 8 {
		t.Fatalf("checked only %d flags", n)
	}
}

// --help lists the subcommands before the flags.
func TestHelpListsSubcommands(t *testing.T) {
	fs, _ := newFlags()
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage()
	for _, want := range []string{"worker healthcheck", "-nats-creds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}
