// Package bytesize reads byte counts as people write them in flags and
// specs ("512M", "2GiB"), for the sandbox's limits and the agent specs
// that lower them.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a byte count: digits, optionally followed by a binary unit
// K, M, G or T (also written Ki/KiB/KB, ...; all powers of 1024). Empty is 0.
func Parse(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size like 512M or 1048576", s)
	}
	unit := strings.TrimSpace(strings.ToUpper(t[i:]))
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "I")
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
	sh, ok := shift[unit]
	if !ok || (unit == "" && t[i:] != "" && strings.ToUpper(strings.TrimSpace(t[i:])) != "B") {
		return 0, fmt.Errorf("%q: unknown unit (want K, M, G or T)", s)
	}
	if n > (1<<62)>>sh {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n << sh, nil
}
