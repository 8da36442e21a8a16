package proc

import "syscall"

// procAttr makes the kernel kill a child if the test process dies first, so
// a crashed or killed test run leaves no process behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
