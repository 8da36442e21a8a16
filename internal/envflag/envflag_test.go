package envflag_test

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/envflag"
	"github.com/formica-run/formica/internal/envflag/envflagtest"
)

type opts struct {
	nats    string
	slots   int
	grace   time.Duration
	dry     bool
	version bool
}

func newFS(o *opts) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.nats, "nats", "nats://127.0.0.1:4222", "server")
	fs.IntVar(&o.slots, "slots", 16, "slots")
	fs.DurationVar(&o.grace, "drain-grace", 30*time.Second, "grace")
	fs.BoolVar(&o.dry, "dry-run", false, "dry")
	fs.BoolVar(&o.version, "version", false, "print the version")
	return fs
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"nats": "FORMICA_NATS", "http-token-file": "FORMICA_HTTP_TOKEN_FILE", "a.b": "FORMICA_A_B",
	} {
		if got := envflag.Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want opts
	}{
		{"defaults", nil, nil, opts{"nats://127.0.0.1:4222", 16, 30 * time.Second, false, false}},
		{"env", nil, map[string]string{"FORMICA_SLOTS": "4", "FORMICA_DRAIN_GRACE": "5s", "FORMICA_DRY_RUN": "true"},
			opts{"nats://127.0.0.1:4222", 4, 5 * time.Second, true, false}},
		{"flag beats env", []string{"--slots", "2"}, map[string]string{"FORMICA_SLOTS": "4"},
			opts{"nats://127.0.0.1:4222", 2, 30 * time.Second, false, false}},
		{"alias", nil, map[string]string{"NATS_URL": "nats://n:1"}, opts{"nats://n:1", 16, 30 * time.Second, false, false}},
		{"own variable beats alias", nil, map[string]string{"NATS_URL": "nats://n:1", "FORMICA_NATS": "nats://f:1"},
			opts{"nats://f:1", 16, 30 * time.Second, false, false}},
		{"version never from env", nil, map[string]string{"FORMICA_VERSION": "true"}, opts{"nats://127.0.0.1:4222", 16, 30 * time.Second, false, false}},
		{"empty clears", nil, map[string]string{"FORMICA_NATS": ""}, opts{"", 16, 30 * time.Second, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o opts
			fs := newFS(&o)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if err := envflag.Apply(fs, env(tt.env)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, o, cmp.AllowUnexported(opts{})); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestBadValueNamesVariable(t *testing.T) {
	var o opts
	fs := newFS(&o)
	err := envflag.Apply(fs, env(map[string]string{"FORMICA_SLOTS": "many", "FORMICA_DRAIN_GRACE": "soon"}))
	if err == nil {
		t.Fatal("bad values accepted")
	}
	for _, want := range []string{`$FORMICA_SLOTS: invalid value "many" for flag --slots`, "$FORMICA_DRAIN_GRACE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestHelpShowsVariables(t *testing.T) {
	var o opts
	fs := newFS(&o)
	envflag.Annotate(fs)
	envflag.Annotate(fs) // idempotent
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	help := b.String()
	for _, want := range []string{"server [$FORMICA_NATS, $NATS_URL]", "slots [$FORMICA_SLOTS]", "grace [$FORMICA_DRAIN_GRACE]"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Count(help, "$FORMICA_SLOTS") != 1 || strings.Contains(help, "FORMICA_VERSION") {
		t.Errorf("help annotated twice or names a variable for --version:\n%s", help)
	}
}

func TestParseReadsProcessEnvironment(t *testing.T) {
	t.Setenv("FORMICA_SLOTS", "3")
	var o opts
	fs := newFS(&o)
	if err := envflag.Parse(fs, []string{"--dry-run"}); err != nil {
		t.Fatal(err)
	}
	if o.slots != 3 || !o.dry {
		t.Fatalf("slots %d dry %v, want 3 true", o.slots, o.dry)
	}
}

func TestCheckHelper(t *testing.T) {
	if n := envflagtest.Check(t, func() *flag.FlagSet { return newFS(&opts{}) }); n != 5 {
		t.Fatalf("checked %d flags, want 5", n)
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(good, []byte("  s3cret\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	if s, err := envflag.ReadSecret(good); err != nil || s != "s3cret" {
		t.Fatalf("ReadSecret = %q, %v; want s3cret", s, err)
	}
	if _, err := envflag.ReadSecret(empty); !errors.Is(err, envflag.ErrEmptySecret) {
		t.Fatalf("empty file: err = %v, want ErrEmptySecret", err)
	}
	if _, err := envflag.ReadSecret(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v", err)
	}
}
