// Package sandbox confines the processes a tool starts. On Linux a call runs
// in fresh PID, mount, IPC, UTS and (unless allowed) network namespaces, with
// a mount view of its working directory (read-write), the system's program
// and library directories (read-only), a private /tmp and a minimal /dev and
// /proc; as an unprivileged uid with no new privileges, Landlock rules, a
// seccomp filter and rlimits. Everything is reached from Go: the current binary re-executes
// itself as the sandbox's init (see reexec.go), so nothing needs installing.
// A worker that is not root sandboxes too ("rootless"): each call then gets
// a user namespace of its own that maps only the worker's ids, and tools run
// as the worker's uid, since there is no other uid to drop to.
//
// The init is PID 1 of the call's PID namespace: when it exits, the kernel
// kills every process of the call, setsid'd, double-forked and daemonised
// ones included. It exits when the command does, when the worker dies (its
// guard pipe closes, and PR_SET_PDEATHSIG) and stops the call's processes
// while the worker itself is stopped (SIGSTOP), so a frozen worker's tools
// are frozen too.
package sandbox

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// ErrUnavailable means this machine cannot sandbox (wrapped with the reason).
var ErrUnavailable = errors.New("sandbox unavailable")

// Limits bound one call. Zero fields take the sandbox's ceiling; a field above
// the ceiling is lowered to it. Each is an rlimit, so it holds per process of
// the call (Processes: per tool user, as RLIMIT_NPROC counts).
type Limits struct {
	// CPU is the CPU time of each process (RLIMIT_CPU, whole seconds).
	CPU time.Duration `json:"cpu,omitempty"`
	// Memory is the address space of each process, in bytes (RLIMIT_AS).
	Memory int64 `json:"memory,omitempty"`
	// Processes bounds the processes the tool user may have (RLIMIT_NPROC).
	Processes int `json:"processes,omitempty"`
	// FileSize is the largest file a process may write, in bytes (RLIMIT_FSIZE).
	FileSize int64 `json:"file_size,omitempty"`
}

// DefaultCeiling is the ceiling of a sandbox whose Options give none.
var DefaultCeiling = Limits{CPU: 10 * time.Minute, Memory: 8 << 30, Processes: 1024, FileSize: 4 << 30}

// orDefault fills l's zero (or negative) fields from DefaultCeiling.
func (l Limits) orDefault() Limits {
	return l.each(DefaultCeiling, func(v, d int64) int64 {
		if v <= 0 {
			return d
		}
		return v
	})
}

// clamp fills l's zero fields from ceil and lowers the others to it.
func (l Limits) clamp(ceil Limits) Limits {
	return l.each(ceil, func(v, c int64) int64 {
		if v <= 0 || v > c {
			return c
		}
		return v
	})
}

// each is the Limits whose every field is pick of l's and c's.
func (l Limits) each(c Limits, pick func(v, c int64) int64) Limits {
	return Limits{
		CPU:       time.Duration(pick(int64(l.CPU), int64(c.CPU))),
		Memory:    pick(l.Memory, c.Memory),
		Processes: int(pick(int64(l.Processes), int64(c.Processes))),
		FileSize:  pick(l.FileSize, c.FileSize),
	}
}

// Options configure a Sandbox.
type Options struct {
	// ToolUser is the uid and gid tools run as, "uid[:gid]" or a user name
	// from /etc/passwd; empty means 65534:65534. It may not be 0.
	ToolUser string
	// DenyNetwork keeps every call off the network, whatever it asks.
	DenyNetwork bool
	// Ceiling bounds every call's Limits; zero fields take DefaultCeiling.
	Ceiling Limits
}

// Request is one confined command.
type Request struct {
	// Dir is the working directory, absolute and symlink-free; the only
	// host directory the command can write.
	Dir string
	// Argv is the program (absolute path) and its arguments.
	Argv []string
	// Env is the whole environment of the command.
	Env []string
	// Network lets the command use the host's network (unless denied).
	Network bool
	Limits  Limits
	// ReadOnly are further host paths (absolute) shown read-only, such as a
	// long-lived tool server's installation; the system directories and Dir
	// are always shown.
	ReadOnly []string
	// Stdin, when set, is the command's standard input (else it reads
	// nothing), and Stderr, when set, takes its standard error apart from
	// out: a server speaking a protocol on stdout keeps its logs apart.
	Stdin  io.Reader
	Stderr io.Writer
}

// Exit is how the command ended.
type Exit struct {
	Code   int            // exit status, or -1 when killed by a signal
	Signal syscall.Signal // the signal that killed it, or 0
	// Killed is set when the sandbox was killed from outside (ctx ended)
	// before the command's own status was known.
	Killed bool
}

// Success reports a zero exit status.
func (e Exit) Success() bool { return e.Code == 0 && e.Signal == 0 && !e.Killed }

// Info describes a sandbox for logs and heartbeats.
type Info struct {
	UID, GID    int
	DenyNetwork bool
	Ceiling     Limits
	// Rootless: the worker is not root; tools run as its own uid, each call
	// in a user namespace of its own.
	Rootless bool
}

func (i Info) String() string {
	s := fmt.Sprintf("uid %d, gid %d, network denied: %v, ceiling %+v", i.UID, i.GID, i.DenyNetwork, i.Ceiling)
	if i.Rootless {
		s += ", rootless (tools run as the worker's own user)"
	}
	return s
}
