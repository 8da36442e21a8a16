package base

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/tools"
)

// callTimeout bounds every tool call made by the tests.
const callTimeout = 30 * time.Second

// fixture is a harness cwd with the base tools bound to it, and a directory
// outside it holding a secret.
type fixture struct {
	root, outside string
	tools         map[string]tools.Tool
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{root: realDir(t, t.TempDir()), outside: realDir(t, t.TempDir())}
	writeTestFile(t, filepath.Join(f.outside, "secret.txt"), "SECRET\n")
	cfg.Cwd = f.root
	ts, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.tools = map[string]tools.Tool{}
	for _, tl := range ts {
		f.tools[tl.Name()] = tl
	}
	return f
}

// run calls the named tool with args and a bounded context.
func (f *fixture) run(t *testing.T, name, args string) (string, error) {
	t.Helper()
	tl, ok := f.tools[name]
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return tl.Run(ctx, json.RawMessage(args))
}

// file writes content to rel under the fixture's root.
func (f *fixture) file(t *testing.T, rel, content string) {
	t.Helper()
	writeTestFile(t, filepath.Join(f.root, rel), content)
}

// link makes rel under root a symlink to target (used verbatim).
func (f *fixture) link(t *testing.T, target, rel string) {
	t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// escapes adds symlinks leading outside and returns paths that must all be
// refused: `..`, absolute elsewhere, symlinked file, symlinked directory
// (existing and new files below it) and a dangling symlink.
func (f *fixture) escapes(t *testing.T) []string {
	t.Helper()
	f.link(t, filepath.Join(f.outside, "secret.txt"), "outfile")
	f.link(t, f.outside, "outdir")
	f.link(t, filepath.Join(f.outside, "new.txt"), "dangling")
	f.link(t, "../../"+filepath.Base(f.outside), "sub/reldir")
	return []string{
		"../secret.txt",
		"sub/../../" + filepath.Base(f.outside) + "/secret.txt",
		filepath.Join(f.outside, "secret.txt"),
		"/etc/passwd",
		"outfile",
		"outdir/secret.txt",
		"outdir/new/new.txt",
		"outdir",
		"dangling",
		"sub/reldir/secret.txt",
	}
}

// checkOutsideUntouched fails when anything outside changed.
func (f *fixture) checkOutsideUntouched(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(f.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret.txt" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("outside dir now holds %v, want only secret.txt", names)
	}
	if b, _ := os.ReadFile(filepath.Join(f.outside, "secret.txt")); string(b) != "SECRET\n" {
		t.Errorf("outside secret changed to %q", b)
	}
}

func realDir(t *testing.T, dir string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFileT(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkErr checks err against a wanted sentinel (nil: any error) and a
// substring of its text; want "" and sentinel nil means no error.
func checkErr(t *testing.T, err error, sentinel error, substr string) {
	t.Helper()
	if sentinel == nil && substr == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %v %q", sentinel, substr)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("error %q does not wrap %v", err, sentinel)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Errorf("error %q does not contain %q", err, substr)
	}
}
