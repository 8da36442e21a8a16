// Package browser_test drives the dashboard in headless Chromium (the
// distribution's chromium package, found on PATH or in $FORMICA_CHROMIUM)
// through github.com/chromedp/chromedp, against a real coordinator process
// with worker processes on loopback: submitting from the form, live trees
// over several workers, transcripts, approvals, cancel, worker loss, a
// broken event stream, and login with a token.
//
// Without Chromium every test skips and says how to install it. Each test
// saves a screenshot as test/browser/screenshots/<Test>.png (CI keeps that
// directory). The binaries are built once, by TestMain, without the race
// detector (proc.Build); every wait is bounded.
package browser_test

import (
	"flag"
	"os"
	"os/exec"
	"testing"

	"github.com/formica-run/formica/test/proc"
)

// Binaries built by TestMain, and the browser found.
var bin struct{ coordinator, worker, formica, chromium string }

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	flag.Parse()
	bin.chromium = findChromium()
	if bin.chromium == "" {
		// Every test skips with the reason; no need to build.
		return m.Run()
	}
	pkgs := []string{"./cmd/coordinator", "./cmd/worker", "./cmd/formica"}
	return proc.RunBuilt(m, "browser test", pkgs, func(_, _ string, bins map[string]string) {
		bin.coordinator, bin.worker, bin.formica = bins["coordinator"], bins["worker"], bins["formica"]
	})
}

// findChromium returns the browser to drive: $FORMICA_CHROMIUM, else the
// first of Debian's names on PATH.
func findChromium() string {
	if p := os.Getenv("FORMICA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needBrowser skips the test when there is no Chromium to drive.
func needBrowser(t *testing.T) {
	t.Helper()
	if bin.chromium == "" {
		t.Skip("chromium not found (install Debian's chromium package: apt-get install chromium; .ci/run does), or set FORMICA_CHROMIUM")
	}
}
