package mcp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/mcp/mcptest"
)

// TestAttackSandboxedServerSeesOnlyCwd: server-filesystem configured to
// serve the whole host ("/") still reads only the thread's cwd when it runs
// in the sandbox: a secret elsewhere on the host does not exist for it.
func TestAttackSandboxedServerSeesOnlyCwd(t *testing.T) {
	srv := mcptest.Find(t)
	sb := openSandbox(t)
	cwd, elsewhere := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("in the harness cwd"), 0o644)
	secret := filepath.Join(elsewhere, "secret.txt")
	os.WriteFile(secret, []byte("sk-host-secret"), 0o644)
	p := newPool(t, map[string]any{"fs": srv.FilesystemStdio("/")}, sb)
	defer p.Hold("r")()
	ts, err := p.Tools(ctxT(t), "r", "", cwd, []string{"fs"})
	if err != nil {
		t.Fatal(err)
	}
	read := find(t, ts, "mcp__fs__read_text_file")
	args := func(p string) json.RawMessage { b, _ := json.Marshal(map[string]string{"path": p}); return b }
	if out, err := read.Run(ctxT(t), args(filepath.Join(cwd, "notes.txt"))); err != nil || out != "in the harness cwd" {
		t.Fatalf("read in cwd = %q, %v", out, err)
	}
	out, err := read.Run(ctxT(t), args(secret))
	if err == nil || strings.Contains(out+err.Error(), "sk-host-secret") {
		t.Fatalf("read outside cwd = %q, %v; want it refused", out, err)
	}
	t.Logf("outside cwd: %v", err)
}
