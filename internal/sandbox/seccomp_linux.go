package sandbox

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside a call: new namespaces (a user
// namespace would hand the command capabilities over its own objects, and
// with them the kernel's least-trodden paths), mounts, kernel keyrings
// (shared by every call of the same tool user), tracing and other
// processes' memory, BPF, perf, userfaultfd, modules, kexec, reboot, swap,
// accounting, quotas, file handles and the kernel log. Without capabilities
// most fail anyway; the filter makes it certain and shrinks what the kernel
// exposes. Only syscalls every 64-bit architecture has are named.
var deniedSyscalls = []string{
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	"keyctl", "add_key", "request_key",
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "open_by_handle_at", "name_to_handle_at",
	"syslog", "vhangup",
}

// errnoENOSYS answers clone3 as a kernel without it would, so the C
// library falls back to clone, whose flags the filter can see.
const errnoENOSYS = seccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))

// loadSeccomp installs the filter on this thread (no TSYNC: the thread execs
// the command next, which inherits it). no_new_privs is already set.
func loadSeccomp() error {
	f := seccomp.Filter{Policy: seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deniedSyscalls},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{{
				Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}},
			}}},
			{Action: errnoENOSYS, Names: []string{"clone3"}},
		},
	}}
	if err := seccomp.LoadFilter(f); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
