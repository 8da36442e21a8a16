package coordinatorcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/formica-run/formica/internal/auth"
)

// TestCredsViewer: `coordinator creds --role viewer --id ops` writes a
// credentials file that names the viewer ops.
func TestCredsViewer(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "ops.creds")
	if err := creds([]string{"--data-dir", filepath.Join(dir, "data"), "--role", "viewer", "--id", "ops", "--out", out}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	id, err := auth.ReadCredsFile(out)
	if err != nil || id.Role != auth.Viewer || id.ID != "ops" {
		t.Fatalf("%s: %+v, %v; want viewer ops", out, id, err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v", out, fi.Mode(), err)
	}
}
