package sandbox

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waitDelay bounds how long Run waits for the output pipe once the init has
// exited; the kernel has killed every process of the call by then.
const waitDelay = time.Second

// Sandbox starts confined commands. It is safe for concurrent use.
type Sandbox struct {
	// info is the tool user's ids (the worker's own when rootless), the
	// network rule, the ceiling and whether the sandbox is rootless.
	info Info
	// userns holds the user namespace whose mapping idmaps the working
	// directory for the tool user (see newIDMap); nil when rootless.
	userns *os.File
}

// New checks that this machine can sandbox and returns a Sandbox; the error
// wraps ErrUnavailable when it cannot. It runs one confined `true` to prove
// the whole path works.
func New(opts Options) (*Sandbox, error) {
	uid, gid, err := parseToolUser(opts.ToolUser)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{info: Info{UID: uid, GID: gid, DenyNetwork: opts.DenyNetwork, Ceiling: opts.Ceiling.orDefault()}}
	if os.Geteuid() != 0 {
		s.info.Rootless, s.info.UID, s.info.GID = true, os.Geteuid(), os.Getegid()
	} else if s.userns, err = newIDMap(os.Geteuid(), os.Getegid(), uid, gid); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	dir, err := os.MkdirTemp("", "formica-sandbox-probe-")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	exit, err := s.Run(ctx, Request{Dir: dir, Argv: []string{"/bin/sh", "-c", "exit 0"}, Env: []string{"PATH=/usr/bin:/bin"}}, &out)
	if err == nil && !exit.Success() {
		err = fmt.Errorf("probe exited %+v: %s", exit, out.String())
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return s, nil
}

// Info describes s.
func (s *Sandbox) Info() Info { return s.info }

// Close releases the sandbox's user namespace. Safe to call twice.
func (s *Sandbox) Close() error {
	if s == nil || s.userns == nil {
		return nil
	}
	return s.userns.Close()
}

// Run runs r confined, its stdout and stderr to out, until it ends or ctx
// does (then every process of the call is killed and Exit.Killed is set).
// An error means the sandbox could not be set up.
func (s *Sandbox) Run(ctx context.Context, r Request, out io.Writer) (Exit, error) {
	if len(r.Argv) == 0 {
		return Exit{}, errors.New("sandbox: empty argv")
	}
	if !filepath.IsAbs(r.Dir) || filepath.Clean(r.Dir) == "/" {
		// The working directory is the one host directory shown
		// read-write; the whole host is never one.
		return Exit{}, fmt.Errorf("sandbox: working directory %q: want an absolute directory other than /", r.Dir)
	}
	for _, p := range r.ReadOnly {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return Exit{}, fmt.Errorf("sandbox: read-only path %q: want an absolute path other than /", p)
		}
	}
	cfg := initConfig{
		Dir: r.Dir, Argv: r.Argv, Env: r.Env, UID: s.info.UID, GID: s.info.GID,
		Network: r.Network && !s.info.DenyNetwork, Limits: r.Limits.clamp(s.info.Ceiling), Parent: os.Getpid(),
		Rootless: s.info.Rootless, ReadOnly: r.ReadOnly,
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return Exit{}, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return Exit{}, err
	}
	defer statusR.Close()
	guardR, guardW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return Exit{}, err
	}
	defer guardW.Close() // the init's guard: closed when the worker dies

	flags := uintptr(unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if !cfg.Network {
		flags |= unix.CLONE_NEWNET
	}
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{"formica-sandbox"}
	cmd.Env = []string{envRole + "=" + roleInit, envConfig + "=" + string(js)}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = out, out
	if r.Stderr != nil {
		cmd.Stderr = r.Stderr
	}
	cmd.Stdin = r.Stdin
	cmd.ExtraFiles = []*os.File{statusW, guardR, s.userns} // fds 3, 4, 5 (none when rootless)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.info.Rootless {
		// The init is the worker's uid in a user namespace of its own, keeping
		// across its exec the capabilities it needs there to build the view.
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: s.info.UID, HostID: s.info.UID, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: s.info.GID, HostID: s.info.GID, Size: 1}}
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN}
	}
	cmd.WaitDelay = waitDelay

	// PR_SET_PDEATHSIG fires when the thread that forked the init exits, so
	// that thread stays locked to this call until the init is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err = cmd.Start()
	statusW.Close()
	guardR.Close()
	if err != nil {
		return Exit{}, fmt.Errorf("sandbox: start: %w", err)
	}
	waitErr := cmd.Wait()
	msg, _ := io.ReadAll(io.LimitReader(statusR, 4096))
	if ctx.Err() != nil {
		return Exit{Code: -1, Signal: syscall.SIGKILL, Killed: true}, nil
	}
	return decodeStatus(msg, cmd.ProcessState, waitErr)
}

// The init reports on fd 3: 'S' and the command's wait status (4 bytes,
// little endian), or 'E' and why the sandbox could not start it.
const (
	statusExit  = 'S'
	statusError = 'E'
)

func decodeStatus(msg []byte, state *os.ProcessState, waitErr error) (Exit, error) {
	switch {
	case len(msg) == 5 && msg[0] == statusExit:
		return exitOf(syscall.WaitStatus(binary.LittleEndian.Uint32(msg[1:]))), nil
	case len(msg) > 0 && msg[0] == statusError:
		return Exit{}, fmt.Errorf("sandbox: %s", msg[1:])
	case state == nil:
		return Exit{}, fmt.Errorf("sandbox: %w", waitErr)
	}
	// No report: the init died before the command ended.
	e := exitOf(state.Sys().(syscall.WaitStatus))
	e.Killed = true
	return e, nil
}

func exitOf(ws syscall.WaitStatus) Exit {
	if ws.Signaled() {
		return Exit{Code: -1, Signal: ws.Signal()}
	}
	return Exit{Code: ws.ExitStatus()}
}
