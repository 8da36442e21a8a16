// Command all runs every test of the module, as README.md's test command:
//
//	go run ./test/all [go test flags...]
//
// It runs `go test -race -timeout 20m ./...` (without -race where cgo, which
// the race detector needs, is off), prints a line per package as go test
// does and the output of every failed test, and ends with the suites that
// skipped and what they need, so a machine without chromium, podman or npm
// says what it did not test. Flags after the command go to go test
// (-count=1, -run X, -short); its exit status is go test's.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// packageTimeout bounds each test binary, so no test hangs the run.
const packageTimeout = "20m"

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout))
}

func run(extra []string, out io.Writer) int {
	args := []string{"test", "-json", "-timeout", packageTimeout}
	r := newReport(out)
	if cgo() {
		args = append(args, "-race")
	} else {
		r.noRace = true
		fmt.Fprintln(out, "note: "+noRace)
	}
	args = append(args, extra...)
	args = append(args, "./...")
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	begun := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(out, sc.Text()) // not an event: pass it on
			continue
		}
		r.add(e)
	}
	err = cmd.Wait()
	r.summary(time.Since(begun))
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(out, err)
		return 1
	}
	return 0
}

// cgo reports whether go builds with cgo here.
func cgo() bool {
	v, err := exec.Command("go", "env", "CGO_ENABLED").Output()
	return err == nil && strings.TrimSpace(string(v)) == "1"
}

// report follows the events: it prints packages as they end and failed
// tests in full, and keeps the skips for the summary.
type report struct {
	out    io.Writer
	output map[string][]string // test output by package and test, until it ends
	skips  map[string][]skip   // by package
	failed []string
	noRace bool // the tests ran without -race
}

// noRace says why the tests ran without the race detector.
const noRace = "cgo is off (no C compiler, such as gcc?) and the race detector needs it: testing without -race"

type skip struct{ test, reason string }

func newReport(out io.Writer) *report {
	return &report{out: out, output: map[string][]string{}, skips: map[string][]skip{}}
}

func (r *report) add(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
	case "output":
		r.output[key] = append(r.output[key], e.Output)
	case "skip":
		if e.Test != "" {
			r.skips[e.Package] = append(r.skips[e.Package], skip{e.Test, skipReason(r.output[key])})
		}
		delete(r.output, key)
	case "pass":
		if e.Test == "" {
			fmt.Fprintf(r.out, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
		}
		delete(r.output, key)
	case "fail":
		// A failed test's output, or a failed package's own (a panic, a
		// timeout, a build failure).
		for _, line := range r.output[key] {
			fmt.Fprint(r.out, line)
		}
		delete(r.output, key)
		if e.Test == "" {
			fmt.Fprintf(r.out, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
			r.failed = append(r.failed, e.Package)
		}
	}
}

// skipReason is the message a skipped test gave (t.Skip's), without the
// file:line prefix.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		if _, rest, ok := strings.Cut(l, ".go:"); ok {
			if _, m, ok := strings.Cut(rest, ": "); ok {
				l = m
			}
		}
		msg = append(msg, l)
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " ")
}

// summary lists the skips grouped by package and reason, then the failed
// packages.
func (r *report) summary(took time.Duration) {
	fmt.Fprintf(r.out, "\n%s in %s\n", verdict(r.failed), took.Round(time.Second))
	if len(r.skips) > 0 || r.noRace {
		fmt.Fprintln(r.out, "skipped (what each needs):")
	}
	if r.noRace {
		fmt.Fprintln(r.out, "  -race: "+noRace)
	}
	for _, pkg := range slices.Sorted(maps.Keys(r.skips)) {
		byReason := map[string][]string{}
		for _, s := range r.skips[pkg] {
			if !strings.Contains(s.test, "/") || !parentSkipped(r.skips[pkg], s.test) {
				byReason[s.reason] = append(byReason[s.reason], s.test)
			}
		}
		for _, reason := range slices.Sorted(maps.Keys(byReason)) {
			tests := byReason[reason]
			name := tests[0]
			if len(tests) > 1 {
				name = fmt.Sprintf("%d tests", len(tests))
			}
			fmt.Fprintf(r.out, "  %s: %s: %s\n", pkg, name, reason)
		}
	}
	for _, pkg := range r.failed {
		fmt.Fprintf(r.out, "FAIL %s\n", pkg)
	}
}

func verdict(failed []string) string {
	if len(failed) > 0 {
		return fmt.Sprintf("FAILED: %d package(s)", len(failed))
	}
	return "all tests passed"
}

// parentSkipped reports whether a subtest's parent was skipped too, so a
// skip is listed once.
func parentSkipped(skips []skip, test string) bool {
	parent := test[:strings.LastIndex(test, "/")]
	return slices.ContainsFunc(skips, func(s skip) bool { return s.test == parent })
}
