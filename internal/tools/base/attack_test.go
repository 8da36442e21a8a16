package base

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/sandbox"
)

// Each test here replays an attack a hostile model could make through bash or
// a file tool, and shows the sandbox (or the file tools' rules) refusing it.

func sandboxed(t *testing.T, cfg Config) *fixture {
	t.Helper()
	cfg.Sandbox = sandboxFor(t)
	return newFixture(t, cfg)
}

func bashArgs(command string) string { return fmt.Sprintf(`{"command":%q}`, command) }

func TestAttackReadWorkerEnvironmentThroughProc(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-attack-openai")
	t.Setenv("FORMICA_TEST_SECRET", "attack-secret")
	f := sandboxed(t, Config{})
	got, err := f.run(t, BashName, bashArgs(`echo "ppid=$PPID"; cat /proc/$PPID/environ; cat /proc/1/environ; `+
		`for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; done; ls /proc | grep -c '^[0-9]'`))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"sk-attack-openai", "attack-secret", "FORMICA_SANDBOX"} {
		if strings.Contains(got, leak) {
			t.Errorf("bash read %q through /proc:\n%s", leak, got)
		}
	}
	if strings.Contains(got, fmt.Sprintf("ppid=%d\n", os.Getpid())) {
		t.Errorf("bash's parent is the worker:\n%s", got)
	}
}

func TestAttackReadShadowDirectly(t *testing.T) {
	f := sandboxed(t, Config{})
	got, err := f.run(t, BashName, bashArgs(`cat /etc/shadow; cat /etc/gshadow; ls /root /home; echo "uid=$(id -u)"`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "root:") {
		t.Errorf("bash read /etc/shadow:\n%s", got)
	}
	if !strings.Contains(got, "/etc/shadow: No such file") || !strings.Contains(got, "/root") || strings.Contains(got, "uid=0\n") {
		t.Errorf("want /etc/shadow, /root and /home missing and a non-root uid:\n%s", got)
	}
}

func TestAttackReadShadowThroughHardLink(t *testing.T) {
	f := sandboxed(t, Config{})
	// From bash: the file is not in view, so there is nothing to link.
	got, err := f.run(t, BashName, bashArgs(`ln /etc/shadow s && cat s`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "root:") {
		t.Errorf("bash linked /etc/shadow into cwd:\n%s", got)
	}
	if _, err := f.run(t, ReadFileName, `{"path":"s"}`); err == nil {
		t.Error("read_file found the link")
	}
	// A link planted in cwd by other means is refused by every file tool.
	if err := os.Link("/etc/shadow", filepath.Join(f.root, "planted")); err != nil {
		t.Skipf("cannot plant a hard link (cwd on another file system?): %v", err)
	}
	for _, c := range []struct{ tool, args string }{
		{ReadFileName, `{"path":"planted"}`},
		{GrepName, `{"pattern":"root","path":"planted"}`},
	} {
		got, err := f.run(t, c.tool, c.args)
		if !errors.Is(err, ErrHardLink) || strings.Contains(got, "root:") {
			t.Errorf("%s on a hard link to /etc/shadow = %q, %v; want ErrHardLink", c.tool, got, err)
		}
	}
	if got, err := f.run(t, GrepName, `{"pattern":"root"}`); err != nil || strings.Contains(got, "planted") {
		t.Errorf("grep over cwd = %q, %v; want the hard link skipped", got, err)
	}
}

func TestAttackWriteThroughHardLink(t *testing.T) {
	f := sandboxed(t, Config{})
	secret := filepath.Join(f.outside, "secret.txt")
	if err := os.Link(secret, filepath.Join(f.root, "planted")); err != nil {
		t.Skipf("cannot plant a hard link: %v", err)
	}
	for _, c := range []struct{ tool, args string }{
		{WriteFileName, `{"path":"planted","content":"overwritten"}`},
		{EditFileName, `{"path":"planted","old":"SECRET","new":"overwritten"}`},
	} {
		if _, err := f.run(t, c.tool, c.args); !errors.Is(err, ErrHardLink) {
			t.Errorf("%s through a hard link: %v, want ErrHardLink", c.tool, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "SECRET\n" {
		t.Errorf("file outside cwd now holds %q", b)
	}
}

func TestAttackReadShadowThroughSymlink(t *testing.T) {
	f := sandboxed(t, Config{})
	got, err := f.run(t, BashName, bashArgs(`ln -s /etc/shadow s; cat s; ln -s / rootfs; ls rootfs/root`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "root:") {
		t.Errorf("bash read /etc/shadow through a symlink:\n%s", got)
	}
	for _, c := range []struct{ tool, args string }{
		{ReadFileName, `{"path":"s"}`}, {GrepName, `{"pattern":"root","path":"s"}`}, {ListDirName, `{"path":"rootfs/root"}`},
	} {
		if _, err := f.run(t, c.tool, c.args); !errors.Is(err, ErrOutsideCwd) {
			t.Errorf("%s through a symlink: %v, want ErrOutsideCwd", c.tool, err)
		}
	}
}

func TestAttackWriteOutsideCwd(t *testing.T) {
	f := sandboxed(t, Config{})
	marker := newMarker()
	targets := []string{
		filepath.Join(f.outside, "escape"), filepath.Join(filepath.Dir(f.root), "escape-"+marker),
		"/tmp/escape-" + marker, "/usr/escape-" + marker, "/etc/escape-" + marker, "/escape-" + marker,
	}
	var cmd strings.Builder
	for _, p := range targets {
		fmt.Fprintf(&cmd, "echo x > %s; ", p)
	}
	cmd.WriteString("echo inside > ok")
	if _, err := f.run(t, BashName, bashArgs(cmd.String())); err != nil {
		t.Fatal(err)
	}
	for _, p := range targets {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("bash wrote %s", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(f.root, "ok")); err != nil || string(b) != "inside\n" {
		t.Errorf("write inside cwd: %q, %v", b, err)
	}
}

func TestAttackReachLoopbackListenerWithNetworkOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := bashArgs(fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED`, port))

	got, err := sandboxed(t, Config{}).run(t, BashName, cmd)
	if err != nil || strings.Contains(got, "CONNECTED") {
		t.Errorf("with network off: %q, %v", got, err)
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("the listener was reached with network off")
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Time{})

	// The same call with the network allowed connects: the test can fail.
	got, err = sandboxed(t, Config{Network: true}).run(t, BashName, cmd)
	if err != nil || !strings.Contains(got, "CONNECTED") {
		t.Errorf("with network on: %q, %v", got, err)
	}
}

func TestAttackSetsidSleepSurvivingTheCall(t *testing.T) {
	f := sandboxed(t, Config{})
	m1, m2, m3 := newMarker(), newMarker(), newMarker()
	got, err := f.run(t, BashName, bashArgs(fmt.Sprintf(`setsid sleep %s >/dev/null 2>&1 < /dev/null & `+
		`( ( nohup sleep %s >/dev/null 2>&1 & ) & ); setsid -f sleep %s >/dev/null 2>&1; echo started`, m1, m2, m3)))
	if err != nil || got != "started\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, m := range []string{m1, m2, m3} {
		waitNoProcess(t, m)
	}
}

func TestAttackForkLoopBoundedByProcessLimit(t *testing.T) {
	const limit = 16
	f := sandboxed(t, Config{Limits: sandbox.Limits{Processes: limit}})
	marker := newMarker()
	got, err := f.run(t, BashName, bashArgs(fmt.Sprintf(`sh -c 'i=0; while [ $i -lt 500 ]; do sleep %s & i=$((i+1)); echo $i > n; done'; `+
		`read k < n; echo "forks=$k"`, marker)))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`forks=(\d+)`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no fork count in %q", got)
	}
	if k, _ := strconv.Atoi(m[1]); k >= limit || !strings.Contains(got, "fork") {
		t.Errorf("fork loop made %d processes under a limit of %d:\n%s", k, limit, got)
	}
	waitNoProcess(t, marker)
}

func TestAttackMemoryHogStoppedByLimit(t *testing.T) {
	f := sandboxed(t, Config{Limits: sandbox.Limits{Memory: 64 << 20}})
	got, err := f.run(t, BashName, bashArgs(`s=$(head -c 300000000 /dev/zero | tr '\0' a); echo "survived ${#s}"`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "survived") || !strings.Contains(got, "alloc") {
		t.Errorf("memory hog under a 64 MiB limit:\n%s", got)
	}
}

func TestAttackFileSizeBombStoppedByLimit(t *testing.T) {
	const limit = 1 << 20
	f := sandboxed(t, Config{Limits: sandbox.Limits{FileSize: limit}})
	got, err := f.run(t, BashName, bashArgs(`head -c 50000000 /dev/zero > bomb; echo "head exited $?"`))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(f.root, "bomb"))
	if err != nil || fi.Size() > limit || !strings.Contains(got, "head exited 153") {
		t.Errorf("file-size bomb under a %d-byte limit: %v, %v\n%s", limit, fi, err, got)
	}
}

func TestAttackCPUHogStoppedByLimit(t *testing.T) {
	f := sandboxed(t, Config{Limits: sandbox.Limits{CPU: time.Second}})
	got, err := f.run(t, BashName, bashArgs(`while :; do :; done`))
	if err != nil || got != "[terminated by signal: "+syscall.SIGXCPU.String()+"]" {
		t.Errorf("CPU hog under a 1s limit: %q, %v", got, err)
	}
}

func TestSandboxedToolUserIsNotRootAndWritesAsTheWorker(t *testing.T) {
	f := sandboxed(t, Config{})
	got, err := f.run(t, BashName, bashArgs(`id -u; mkdir d; echo x > d/f; grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status`))
	if want := "65534\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\n"; err != nil || got != want {
		t.Errorf("tool uid and capabilities: %q, %v; want %q", got, err, want)
	}
	for _, p := range []string{"d", "d/f"} {
		fi, err := os.Stat(filepath.Join(f.root, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
			t.Errorf("%s owned by %d:%d, want the worker's %d:%d", p, st.Uid, st.Gid, os.Geteuid(), os.Getegid())
		}
	}
}

func TestAttackUserNamespaceForCapabilities(t *testing.T) {
	f := sandboxed(t, Config{})
	got, err := f.run(t, BashName, bashArgs(`unshare -U -r id -u; unshare -r -m mount -t tmpfs x /tmp; echo done`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "unshare: unshare failed: Operation not permitted\nunshare: unshare failed: Operation not permitted\ndone\n"; got != want {
		t.Errorf("got %q, want both unshares refused", got)
	}
	// Threads and background jobs still work (clone3 answers ENOSYS, so
	// the C library falls back to clone).
	got, err = f.run(t, BashName, bashArgs(`sleep 0.01 & wait; (echo sub); echo $(echo cmd) | cat; `+
		`seq 300000 | sort -rn --parallel=4 -S 16M | head -1`))
	if err != nil || got != "sub\ncmd\n300000\n" {
		t.Errorf("processes under the filter: %q, %v", got, err)
	}
}
