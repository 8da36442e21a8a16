package tools

import (
	"fmt"
	"slices"

	"github.com/formica-run/formica/internal/policy"
)

// Direct returns a helper's direct tools from its parent's direct tools P and
// its own tools L:
//
//	inherit:            P ∪ L
//	override:           L
//	restrict (only N):  {t in P | t.name in N} ∪ L
//
// Each name appears once; a tool of L replaces an inherited one of the same name.
func Direct(v policy.Visibility, only []string, parent, local []Tool) ([]Tool, error) {
	var kept []Tool
	switch v {
	case "", policy.Inherit:
		kept = parent
	case policy.Override:
	case policy.Restrict:
		for _, t := range parent {
			if slices.Contains(only, t.Name()) {
				kept = append(kept, t)
			}
		}
	default:
		return nil, fmt.Errorf("%w: tool policy %q", policy.ErrBadPolicy, v)
	}
	return Merge(local, kept), nil
}

// Merge concatenates tool lists so each name appears once: the first list
// holding a name wins, and order is first appearance. Visible tools are
// Merge(direct, shims): direct beats shim.
func Merge(lists ...[]Tool) []Tool {
	seen := map[string]bool{}
	var out []Tool
	for _, l := range lists {
		for _, t := range l {
			if seen[t.Name()] {
				continue
			}
			seen[t.Name()] = true
			out = append(out, t)
		}
	}
	return out
}

// Names returns the tools' names in order.
func Names(ts []Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}
