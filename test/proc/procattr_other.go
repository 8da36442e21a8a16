//go:build !linux

package proc

import "syscall"

// procAttr has no parent-death signal outside Linux; the test's cleanup
// still kills every process.
func procAttr() *syscall.SysProcAttr { return nil }
