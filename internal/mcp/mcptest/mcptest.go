// Package mcptest locates the real MCP servers the tests run: the npm
// packages @modelcontextprotocol/server-everything and
// @modelcontextprotocol/server-filesystem, installed by .ci/run with
// `npm install --prefix "$FORMICA_MCP_NPM"`.
package mcptest

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EnvDir names the npm prefix the servers are installed under.
const EnvDir = "FORMICA_MCP_NPM"

// Servers is where the test servers are.
type Servers struct {
	// Node is the node binary; Modules the node_modules directory (what a
	// sandboxed server must be shown read-only).
	Node, Modules string
	// Everything and Filesystem are the servers' entry scripts.
	Everything, Filesystem string
}

// Find returns the servers, skipping the test when EnvDir is unset outside
// CI (and failing it in CI, where .ci/run sets it).
func Find(t testing.TB) Servers {
	t.Helper()
	dir := os.Getenv(EnvDir)
	if dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is unset in CI: .ci/run installs the MCP test servers and sets it", EnvDir)
		}
		t.Skipf("%s is unset: install the MCP test servers with `npm install --prefix DIR @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem` and set %s=DIR", EnvDir, EnvDir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %v", err)
	}
	if node, err = filepath.EvalSymlinks(node); err != nil {
		t.Fatal(err)
	}
	mods, err := filepath.EvalSymlinks(filepath.Join(dir, "node_modules"))
	if err != nil {
		t.Fatalf("%s=%s has no node_modules: %v", EnvDir, dir, err)
	}
	s := Servers{Node: node, Modules: mods,
		Everything: filepath.Join(mods, "@modelcontextprotocol/server-everything/dist/index.js"),
		Filesystem: filepath.Join(mods, "@modelcontextprotocol/server-filesystem/dist/index.js")}
	for _, f := range []string{s.Everything, s.Filesystem} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("MCP test server missing: %v", err)
		}
	}
	return s
}

// EverythingStdio is the config entry of server-everything over stdio;
// mark is set in its environment so a test can find its process.
func (s Servers) EverythingStdio(mark string) map[string]any {
	return map[string]any{"command": s.Node, "args": []string{s.Everything, "stdio"},
		"env": map[string]string{"FORMICA_TEST_MARK": mark}, "read_only": []string{s.Modules}}
}

// FilesystemStdio is the config entry of server-filesystem over stdio,
// serving dir.
func (s Servers) FilesystemStdio(dir string) map[string]any {
	return map[string]any{"command": s.Node, "args": []string{s.Filesystem, dir}, "read_only": []string{s.Modules}}
}

// Config renders servers as an mcpServers file.
func Config(servers map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	return b
}

// FreePort returns a loopback port free a moment ago (for a server that
// takes its port from the environment).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
