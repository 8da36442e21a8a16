package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode"
)

// printable shows s with its control characters escaped (ESC as \x1b, NUL
// as \x00, ...): text from tasks, models and tools cannot move the cursor,
// clear the screen or retitle the terminal it is shown on. Newlines and
// tabs are kept.
func printable(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unsafeRune(r):
			b.WriteRune(r)
		case r == unicode.ReplacementChar:
			b.WriteString(`\ufffd`)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r != '\n' && r != '\t' && (unicode.IsControl(r) || r == unicode.ReplacementChar || r == '\u2028' || r == '\u2029' ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)) // bidirectional overrides
}

// shown is s as it may be written to w: escaped when w is a terminal,
// unchanged for pipes and files (which get the exact text).
func shown(w io.Writer, s string) string {
	if isTerminal(w) {
		return printable(s)
	}
	return s
}
