package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// newIDMap returns a user namespace whose mapping makes files owned by the
// worker (uid, gid) appear owned by the tool user through an idmapped mount,
// and files the tool user creates land on disk as the worker's. So the tool
// runs as an unprivileged uid for real, yet reads and writes the working
// directory as the worker would, and nothing else of the host is mapped.
//
// The namespace is made by a short-lived re-executed child (roleHold) and
// kept alive by the returned fd.
func newIDMap(uid, gid, toolUID, toolGID int) (*os.File, error) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"formica-sandbox-userns"}
	cmd.Env = []string{envRole + "=" + roleHold}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: toolUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: toolGID, Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("user namespace for the tool user: %w", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("user namespace for the tool user: %w", err)
	}
	return f, nil
}
