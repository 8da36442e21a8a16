package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var shared = sync.OnceValues(func() (*Sandbox, error) { return New(Options{}) })

// newSandbox returns the package's sandbox, skipping where none can be made
// (not root): CI runs as root, so there it always runs.
func newSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := shared()
	if err != nil {
		if os.Geteuid() == 0 {
			t.Fatalf("root cannot sandbox: %v", err)
		}
		t.Skipf("no sandbox: %v", err)
	}
	return s
}

func run(t *testing.T, s *Sandbox, dir, script string, opts ...func(*Request)) (string, Exit) {
	t.Helper()
	r := Request{Dir: dir, Argv: []string{"/bin/bash", "-c", script}, Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}}
	for _, o := range opts {
		o(&r)
	}
	var out bytes.Buffer
	exit, err := s.Run(t.Context(), r, &out)
	if err != nil {
		t.Fatalf("Run: %v (output %q)", err, out.String())
	}
	return out.String(), exit
}

func TestRunBasics(t *testing.T) {
	s := newSandbox(t)
	dir := t.TempDir()
	out, exit := run(t, s, dir, "id -u; id -g; pwd; echo hi > f; stat -c %u:%g f; ls /; echo $$ $PPID; exit 3")
	t.Logf("%s", out)
	if exit.Code != 3 {
		t.Errorf("exit %+v", exit)
	}
	fi, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
		t.Errorf("file owned by %d:%d, want the worker's %d:%d", st.Uid, st.Gid, os.Geteuid(), os.Getegid())
	}
	if !strings.HasPrefix(out, "65534\n65534\n"+dir+"\n65534:65534\n") {
		t.Errorf("output %q", out)
	}
}

func TestRunRefusesTheHostRootAsCwd(t *testing.T) {
	s := newSandbox(t)
	for _, dir := range []string{"/", "//", "relative"} {
		var out bytes.Buffer
		if _, err := s.Run(t.Context(), Request{Dir: dir, Argv: []string{"/bin/true"}}, &out); err == nil {
			t.Errorf("Run in %q: no error", dir)
		}
	}
}
