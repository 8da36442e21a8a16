package sandbox

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// runExec is the last step before the command, run as root inside the view:
// no new privileges, Landlock rules, rlimits, the tool user's ids (this
// thread's, then exec), a seccomp filter, the command. It only returns on failure.
func runExec(config string) int {
	runtime.LockOSThread() // every per-thread setting below must be on the thread that execs
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "formica sandbox: %v\n", err)
		return 126
	}
	var cfg initConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("no_new_privs: %w", err))
	}
	if err := landlock(cfg.Dir, cfg.ReadOnly, cfg.Network); err != nil {
		return fail(err)
	}
	if err := setLimits(cfg.Limits); err != nil {
		return fail(err)
	}
	if cfg.Rootless {
		// Already the worker's uid: only the namespace capabilities the
		// init kept must not reach the command.
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("clear ambient capabilities: %w", err))
		}
	} else if err := dropIDs(cfg.UID, cfg.GID); err != nil {
		return fail(err)
	}
	if err := loadSeccomp(); err != nil {
		return fail(err)
	}
	if err := unix.Chdir(cfg.Dir); err != nil {
		return fail(err)
	}
	err := unix.Exec(cfg.Argv[0], cfg.Argv, cfg.Env)
	return fail(fmt.Errorf("exec %s: %w", cfg.Argv[0], err))
}

// setLimits sets the call's rlimits, never above the current hard limits.
func setLimits(l Limits) error {
	secs := uint64(math.Ceil(l.CPU.Seconds()))
	for _, r := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_CPU, max(secs, 1)},
		{unix.RLIMIT_AS, uint64(l.Memory)},
		{unix.RLIMIT_NPROC, uint64(l.Processes)},
		{unix.RLIMIT_FSIZE, uint64(l.FileSize)},
		{unix.RLIMIT_CORE, 0},
	} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err != nil {
			return err
		}
		v := min(r.v, cur.Max)
		hard := v
		if r.res == unix.RLIMIT_CPU {
			hard = min(v+1, cur.Max) // SIGXCPU at the soft limit, SIGKILL a second later
		}
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: v, Max: hard}); err != nil {
			return fmt.Errorf("rlimit %d: %w", r.res, err)
		}
	}
	return nil
}

// dropIDs makes this thread the tool user for real (no supplementary
// groups; real, effective and saved ids), losing root's capabilities. Only
// this thread: it execs next, and the exec'd program has its ids.
func dropIDs(uid, gid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	return nil
}
