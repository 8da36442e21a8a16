package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initConfig is what Run hands the init (JSON in envConfig).
type initConfig struct {
	Dir     string   `json:"dir"`
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
	Network bool     `json:"network"`
	Limits  Limits   `json:"limits"`
	Parent  int      `json:"parent"` // the worker's pid, in the host's PID namespace
	// Rootless: no uid to drop to and no idmap; the call's own user
	// namespace maps only the worker's ids.
	Rootless bool `json:"rootless,omitempty"`
	// ReadOnly are further host paths shown read-only (Request.ReadOnly).
	ReadOnly []string `json:"read_only,omitempty"`
}

// The init's inherited descriptors (Run's ExtraFiles).
const (
	fdStatus = 3 // write: the command's status, or why it could not start
	fdGuard  = 4 // read: EOF once the worker is gone
	fdUserns = 5 // the user namespace of the working directory's idmap
)

// parentPoll is how often the init looks at the worker's state.
const parentPoll = 50 * time.Millisecond

// runInit is PID 1 of a call. It builds the mount view, starts the command
// through roleExec, reaps every process reparented to it, and exits with the
// command, taking every other process of the namespace with it.
func runInit(config string) int {
	runtime.LockOSThread()
	for _, fd := range []int{fdStatus, fdGuard, fdUserns} {
		unix.CloseOnExec(fd)
	}
	status := os.NewFile(fdStatus, "status")
	fail := func(err error) int {
		_, _ = status.Write(append([]byte{statusError}, err.Error()...))
		return 1
	}
	var cfg initConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return fail(fmt.Errorf("init config: %w", err))
	}
	// Opened while the host's /proc is still in view: the worker's state
	// stays readable through this descriptor after the view is built.
	parent, err := os.Open(fmt.Sprintf("/proc/%d/stat", cfg.Parent))
	if err != nil {
		return fail(fmt.Errorf("watch the worker: %w", err))
	}
	go watchGuard(os.NewFile(fdGuard, "guard"))
	go watchParent(parent)

	userns := fdUserns
	if cfg.Rootless {
		userns = -1
	}
	if err := buildView(cfg.Dir, cfg.ReadOnly, userns); err != nil {
		return fail(err)
	}
	if !cfg.Network {
		if err := loopbackUp(); err != nil {
			return fail(err)
		}
	}
	_ = unix.Sethostname([]byte("formica"))

	js, err := json.Marshal(cfg)
	if err != nil {
		return fail(err)
	}
	proc, err := os.StartProcess("/proc/self/exe", []string{"formica-sandbox-exec"}, &os.ProcAttr{
		Dir:   cfg.Dir,
		Env:   []string{envRole + "=" + roleExec, envConfig + "=" + string(js)},
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail(fmt.Errorf("start the command: %w", err))
	}
	ws, err := reap(proc.Pid)
	if err != nil {
		return fail(err)
	}
	msg := []byte{statusExit, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(msg[1:], uint32(ws))
	_, _ = status.Write(msg)
	return 0 // PID 1 exits: the kernel kills what is left of the call
}

// reap waits for every child until pid ends and returns pid's status.
// Orphans are reparented to PID 1, so reaping them all keeps zombies from
// holding the tool user's process count.
func reap(pid int) (unix.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, fmt.Errorf("wait: %w", err)
		case got == pid && (ws.Exited() || ws.Signaled()):
			return ws, nil
		}
	}
}

// watchGuard ends the call once the worker's end of the guard pipe closes:
// the worker exited or was killed, whichever thread forked the init.
func watchGuard(guard *os.File) {
	_, _ = io.Copy(io.Discard, guard) // nothing is written: it returns at EOF
	unix.Exit(137)
}

// watchParent stops the call's processes while the worker is stopped and
// continues them when it continues, so a frozen worker's tools are frozen
// too; the call ends if the worker is gone or a zombie.
func watchParent(stat *os.File) {
	buf := make([]byte, 1024)
	frozen := false
	for range time.Tick(parentPoll) {
		n, _ := stat.ReadAt(buf, 0)
		if n == 0 {
			unix.Exit(137)
		}
		state := procState(buf[:n])
		if state == 'Z' || state == 'X' {
			unix.Exit(137)
		}
		stopped := state == 'T' || state == 't'
		switch {
		case stopped:
			_ = unix.Kill(-1, unix.SIGSTOP) // every tick: also what forked meanwhile
			frozen = true
		case frozen:
			_ = unix.Kill(-1, unix.SIGCONT)
			frozen = false
		}
	}
}

// procState is the state field of a /proc/<pid>/stat line.
func procState(stat []byte) byte {
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2]
	}
	return '?'
}

// loopbackUp brings up lo in the call's own network namespace, so a command
// can still talk to itself over 127.0.0.1 while the host is out of reach.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return nil
}
