package sandbox

import (
	"fmt"
	"io"
	"os"
)

// runRole runs a re-executed role and returns the process's exit code.
func runRole(role, config string) int {
	switch role {
	case roleInit:
		return runInit(config)
	case roleExec:
		return runExec(config)
	case roleHold:
		_, _ = io.Copy(io.Discard, os.Stdin) // until the creator lets go
		return 0
	}
	fmt.Fprintf(os.Stderr, "formica sandbox: unknown role %q\n", role)
	return 127
}
