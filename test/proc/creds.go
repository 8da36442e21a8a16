package proc

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Creds issues credentials of role under id with `coordinator creds` (the
// coordinator binary bin) from dataDir's authority, into a file in a
// temporary directory, and returns its path.
func Creds(t testing.TB, bin, dataDir, role, id string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), role+"-"+id+".creds")
	cmd := exec.Command(bin, "creds", "--data-dir", dataDir, "--role", role, "--id", id, "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("coordinator creds --role %s --id %s: %v\n%s", role, id, err, b)
	}
	return out
}
