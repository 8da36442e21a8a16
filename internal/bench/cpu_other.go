//go:build !unix

package bench

import "time"

// cpuTime is not measured here: CPU figures read zero.
func cpuTime() time.Duration { return 0 }
