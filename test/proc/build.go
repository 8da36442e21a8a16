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
// root, such as "./cmd/worker") into dir, with -race when this test binary
// has it, and returns each binary's path by its base name (as go build
// names it: a module's major-version suffix is skipped, so
// github.com/nats-io/nats-server/v2 is nats-server). root is the module
// root; progress and compiler output go to log.
func Build(root, dir string, log io.Writer, pkgs ...string) (map[string]string, error) {
	return build(root, dir, log, Race, pkgs...)
}

// BuildNoRace is Build without the race detector, whatever the test binary
// has: for tests that measure the processes' memory (the race detector
// multiplies it) or drive them at a scale its slowdown would not finish.
// pkgs may name main packages of the module's dependencies too
// ("github.com/nats-io/nats-server/v2").
func BuildNoRace(root, dir string, log io.Writer, pkgs ...string) (map[string]string, error) {
	return build(root, dir, log, false, pkgs...)
}

func build(root, dir string, log io.Writer, race bool, pkgs ...string) (map[string]string, error) {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkgs...)
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
	fmt.Fprintf(log, "built %d binaries (race %v) in %s\n", len(pkgs), race, time.Since(t0).Round(time.Millisecond))
	return bins, nil
}
