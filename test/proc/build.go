package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Build builds the main packages pkgs (module paths relative to the module
// root, such as "./cmd/worker", or main packages of the module's
// dependencies, such as "github.com/nats-io/nats-server/v2") into dir, and
// returns each binary's path by its base name (as go build names it: a
// module's major-version suffix is skipped, so
// github.com/nats-io/nats-server/v2 is nats-server). root is the module
// root; progress and compiler output go to log.
//
// The binaries are built without the race detector, whatever the test
// binary has: every package that runs them then shares one entry of the
// build cache, so a `go test -race ./...` links them in seconds instead of
// compiling the whole tree again with -race; and tests that measure memory
// or drive a scale see the processes as they run in production. The race
// detector still covers the same code in the in-process tests.
func Build(root, dir string, log io.Writer, pkgs ...string) (map[string]string, error) {
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	t0 := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %v: %w", args, err)
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		name := path.Base(p)
		if v := path.Base(path.Dir(p)); len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" && v != "." {
			name = v // a major version suffix: github.com/nats-io/nats-server/v2 builds nats-server
		}
		bins[name] = filepath.Join(dir, name)
		if _, err := os.Stat(bins[name]); err != nil {
			return nil, fmt.Errorf("build %s: %w", p, err)
		}
	}
	fmt.Fprintf(log, "built %d binaries in %s\n", len(pkgs), time.Since(t0).Round(time.Millisecond))
	return bins, nil
}
