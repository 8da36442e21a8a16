package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/formica-run/formica/internal/dirlock"
)

// Each taker holds a different file of the pool; with all held the next
// is refused, and a released file goes to the next taker. (flock locks
// belong to open file descriptions, so takers in one process exclude each
// other as separate processes do.)
func TestTakeFree(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.creds", "a.creds", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "c.creds"), 0o755) // not a file: skipped
	first, l1, err := dirlock.TakeFree(dir, "*.creds")
	if err != nil || filepath.Base(first) != "a.creds" {
		t.Fatalf("first take: %s, %v; want a.creds", first, err)
	}
	second, l2, err := dirlock.TakeFree(dir, "*.creds")
	if err != nil || filepath.Base(second) != "b.creds" {
		t.Fatalf("second take: %s, %v; want b.creds", second, err)
	}
	if _, _, err := dirlock.TakeFree(dir, "*.creds"); !errors.Is(err, dirlock.ErrPoolExhausted) {
		t.Fatalf("third take: %v, want ErrPoolExhausted", err)
	}
	l1.Release()
	again, l3, err := dirlock.TakeFree(dir, "*.creds")
	if err != nil || again != first {
		t.Fatalf("take after a release: %s, %v; want %s", again, err, first)
	}
	l2.Release()
	l3.Release()
	if _, _, err := dirlock.TakeFree(t.TempDir(), "*.creds"); err == nil || errors.Is(err, dirlock.ErrPoolExhausted) {
		t.Fatalf("empty pool: %v, want an error naming it", err)
	}
}
