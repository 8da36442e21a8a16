//go:build !linux

package cluster_test

import "syscall"

// procAttr has no parent-death signal outside Linux; t.Cleanup still kills
// every process.
func procAttr() *syscall.SysProcAttr { return nil }
