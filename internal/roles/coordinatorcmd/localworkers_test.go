package coordinatorcmd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLocalWorkerIDsLastAcrossStarts: the local workers of one data dir
// have the same ids at every start, distinct from each other and from
// another data dir's.
func TestLocalWorkerIDsLastAcrossStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := localWorkerIDs(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 || first[0] == first[1] || first[1] == first[2] {
		t.Fatalf("ids %q, want three distinct", first)
	}
	again, err := localWorkerIDs(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again, first[:2]) {
		t.Errorf("ids after a restart %q, want %q", again, first[:2])
	}
	if fi, err := os.Stat(filepath.Join(dir, localWorkerIDFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("id file: %v %v, want it kept private (0600)", fi, err)
	}
	other, err := localWorkerIDs(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if other[0] == first[0] {
		t.Errorf("two data dirs share local worker id %s", other[0])
	}
	if err := os.WriteFile(filepath.Join(dir, localWorkerIDFile), []byte("a.b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := localWorkerIDs(dir, 1); err == nil {
		t.Error("an id that is not one subject token was taken")
	}
}
