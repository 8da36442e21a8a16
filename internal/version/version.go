// Package version says which build of Formica is running, for --version
// and the logs. A release stamps it with
//
//	-ldflags "-X github.com/formica-run/formica/internal/version.stamp=v1.2.3"
//
// and otherwise it comes from the build information Go records (the module
// version for `go install ...@v1.2.3`, the VCS revision for a checkout).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// stamp is set at link time; empty in development builds.
var stamp string

// Version is the release version, or "devel" with the VCS revision when
// known ("devel+3f2a9c1d2e4b", "+dirty" for uncommitted changes).
func Version() string {
	if stamp != "" {
		return stamp
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + rev + dirty
}

// String is the line --version prints: program, version, Go version and
// platform.
func String(program string) string {
	return fmt.Sprintf("%s %s (%s %s/%s)", program, Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
