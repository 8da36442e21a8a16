package base

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/test/proc"
)

func newMarker() string { return proc.Marker() }

func waitNoProcess(t *testing.T, marker string) { t.Helper(); proc.WaitNoArg(t, marker, 5*time.Second) }

var testSandbox = sync.OnceValues(func() (*sandbox.Sandbox, error) { return sandbox.New(sandbox.Options{}) })

// sandboxFor returns the tests' shared sandbox. As root (CI) it must work;
// elsewhere the sandboxed half of a test is skipped.
func sandboxFor(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	s, err := testSandbox()
	if err != nil {
		if os.Geteuid() == 0 {
			t.Fatalf("root cannot sandbox: %v", err)
		}
		t.Skipf("no sandbox here: %v", err)
	}
	return s
}

// modes runs fn with bash unconfined and with bash in the sandbox.
func modes(t *testing.T, fn func(t *testing.T, cfg Config)) {
	t.Run("plain", func(t *testing.T) { fn(t, Config{}) })
	t.Run("sandboxed", func(t *testing.T) { fn(t, Config{Sandbox: sandboxFor(t)}) })
}
