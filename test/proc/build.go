package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"time"
)

// Build builds the main packages pkgs (module paths relative to the module
// root, such as "./cmd/worker") into dir, with -race when this test binary
// has it, and returns each binary's path by its base name. root is the
// module root; progress and compiler output go to log.
func Build(root, dir string, log io.Writer, pkgs ...string) (map[string]string, error) {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if Race {
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
		bins[name] = filepath.Join(dir, name)
		if _, err := os.Stat(bins[name]); err != nil {
			return nil, fmt.Errorf("build %s: %w", p, err)
		}
	}
	fmt.Fprintf(log, "built %d binaries (race %v) in %s\n", len(pkgs), Race, time.Since(t0).Round(time.Millisecond))
	return bins, nil
}
