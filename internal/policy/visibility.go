package policy

import "fmt"

// Visibility is how a helper's direct tools derive from its parent's.
type Visibility string

// The three visibility policies of DESIGN's "Tool visibility".
const (
	Inherit  Visibility = "inherit"
	Override Visibility = "override"
	Restrict Visibility = "restrict"
)

// ParseVisibility checks s; empty means Inherit.
func ParseVisibility(s string) (Visibility, error) {
	switch v := Visibility(s); v {
	case "":
		return Inherit, nil
	case Inherit, Override, Restrict:
		return v, nil
	}
	return "", fmt.Errorf("%w: tool policy %q (want inherit, override or restrict)", ErrBadPolicy, s)
}
