package base

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestConfine(t *testing.T) {
	f := newFixture(t, Config{})
	f.file(t, "a.txt", "a\n")
	f.file(t, "sub/b.txt", "b\n")
	f.link(t, "a.txt", "inlink")
	f.link(t, filepath.Join(f.root, "sub"), "absin")
	f.link(t, "newfile.txt", "dangling-in")
	f.link(t, "loop2", "loop1")
	f.link(t, "loop1", "loop2")
	escapes := f.escapes(t)

	tests := []struct {
		name, path, want string
	}{
		{"plain", "a.txt", "a.txt"},
		{"dot segments", "./sub/../a.txt", "a.txt"},
		{"cwd itself", ".", ""},
		{"absolute inside", filepath.Join(f.root, "sub", "b.txt"), "sub/b.txt"},
		{"new file in new dirs", "new/dir/file.txt", "new/dir/file.txt"},
		{"symlink inside", "inlink", "a.txt"},
		{"absolute symlink to a dir inside", "absin/b.txt", "sub/b.txt"},
		{"dangling symlink inside", "dangling-in", "newfile.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Confine(f.root, tt.path)
			if err != nil {
				t.Fatalf("Confine(%q): %v", tt.path, err)
			}
			if want := filepath.Join(f.root, tt.want); got != want {
				t.Errorf("Confine(%q) = %q, want %q", tt.path, got, want)
			}
		})
	}
	for _, p := range escapes {
		t.Run("escape "+p, func(t *testing.T) {
			got, err := Confine(f.root, p)
			if !errors.Is(err, ErrOutsideCwd) {
				t.Errorf("Confine(%q) = %q, %v; want ErrOutsideCwd", p, got, err)
			}
		})
	}
	for _, p := range []string{"", "loop1", "a.txt/below", "nul\x00byte"} {
		t.Run("error "+p, func(t *testing.T) {
			got, err := Confine(f.root, p)
			if err == nil || errors.Is(err, ErrOutsideCwd) {
				t.Errorf("Confine(%q) = %q, %v; want a non-escape error", p, got, err)
			}
		})
	}
}

func TestConfineSymlinkedCwd(t *testing.T) {
	f := newFixture(t, Config{})
	f.file(t, "a.txt", "a\n")
	alias := filepath.Join(f.outside, "alias")
	if err := os.Symlink(f.root, alias); err != nil {
		t.Fatal(err)
	}
	got, err := Confine(alias, "a.txt")
	if err != nil || got != filepath.Join(f.root, "a.txt") {
		t.Errorf("Confine via symlinked cwd = %q, %v; want %q", got, err, filepath.Join(f.root, "a.txt"))
	}
	// An absolute path spelled through the alias is inside too.
	if _, err := Confine(f.root, filepath.Join(alias, "a.txt")); err != nil {
		t.Errorf("absolute path through an alias of cwd: %v", err)
	}
	for _, cwd := range []string{"", filepath.Join(f.root, "missing"), filepath.Join(f.root, "a.txt")} {
		if _, err := Confine(cwd, "x"); err == nil {
			t.Errorf("Confine with cwd %q: no error", cwd)
		}
	}
}
