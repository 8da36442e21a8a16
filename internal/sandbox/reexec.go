package sandbox

import "os"

// Environment variables that select and configure a re-executed role.
const (
	envRole   = "FORMICA_SANDBOX_ROLE"
	envConfig = "FORMICA_SANDBOX_CONFIG"
)

// Roles of the current binary when it is re-executed by a sandbox.
const (
	roleInit = "init" // PID 1 of a call: mount view, watch the worker, reap
	roleExec = "exec" // the last step before the command: limits, uid, exec
	roleHold = "hold" // keeps a user namespace alive while its fd is opened
)

// init runs the sandbox roles before anything else of the program: any
// binary that links this package (worker, formica, the test binaries of
// packages that run bash) can serve as the sandbox's init, so nothing needs
// installing and no main has to remember a hook.
func init() {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runRole(role, os.Getenv(envConfig)))
	}
}
