package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyPathsAndStdio: a Request's read-only paths (here under /tmp,
// which the view replaces) are readable and not writable, and stdin and a
// separate stderr reach the command.
func TestReadOnlyPathsAndStdio(t *testing.T) {
	s := newSandbox(t)
	dir, ro := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "lib.js"), []byte("library\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	out, exit := run(t, s, dir, "cat "+ro+"/lib.js; read line; echo got $line; echo x > "+ro+"/planted || echo refused >&2; echo y > f",
		func(r *Request) {
			r.ReadOnly = []string{ro}
			r.Stdin = strings.NewReader("hello\n")
			r.Stderr = &stderr
		})
	if !exit.Success() || out != "library\ngot hello\n" {
		t.Fatalf("output %q, exit %+v", out, exit)
	}
	if !strings.Contains(stderr.String(), "refused") {
		t.Errorf("stderr %q: the write into a read-only path was not refused", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(ro, "planted")); err == nil {
		t.Error("a file was planted in a read-only path")
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
		t.Errorf("cwd no longer writable: %v", err)
	}
}
