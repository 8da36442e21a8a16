package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RunBuilt is the TestMain of a package of process tests: it builds pkgs
// (Build) into a temporary directory, hands use the module root, that
// directory and the binaries by name, runs the tests and removes the
// binaries. name prefixes its messages ("durable test"); the result is the
// exit code for os.Exit. The package two levels up is the module root.
func RunBuilt(m *testing.M, name string, pkgs []string, use func(root, dir string, bins map[string]string)) int {
	dir, err := os.MkdirTemp("", "formica-"+strings.ReplaceAll(name, " ", "-"))
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	log := &Output{}
	bins, err := Build(root, dir, log, pkgs...)
	if err != nil || testing.Verbose() {
		fmt.Fprint(os.Stderr, log.String())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+": build binaries:", err)
		return 1
	}
	use(root, dir, bins)
	return m.Run()
}
