//go:build !race

package proc

// Race is true when the test binary, and so the binaries Build makes, use
// the race detector.
const Race = false
