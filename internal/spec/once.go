package spec

import (
	"fmt"
	"path"
	"slices"
)

// InDoubt says what becomes of a call of an at-most-once tool that its
// thread, running again after a failure, finds started but never answered:
// it may or may not have taken effect.
type InDoubt string

const (
	// InDoubtReport (the default) answers the model at once that the call
	// is in doubt; the call is not run again.
	InDoubtReport InDoubt = "report"
	// InDoubtAsk asks a person through the approvals: allow runs the call
	// again, deny reports it in doubt.
	InDoubtAsk InDoubt = "ask"
)

// OnceOnly reports whether calls of tool must not run twice under h: tool
// matches a glob of h.AtMostOnce (path.Match, as permission rules' tools).
func (h *Harness) OnceOnly(tool string) bool {
	return slices.ContainsFunc(h.AtMostOnce, func(g string) bool {
		ok, _ := path.Match(g, tool)
		return ok
	})
}

// AsksInDoubt reports whether a call found in doubt goes to a person.
func (h *Harness) AsksInDoubt() bool { return h.InDoubt == InDoubtAsk }

// AddOnce adds from's at-most-once rule to h's: its tools join h's, and
// h asks about calls in doubt if from does. A helper takes its parent's
// rule and a handoff target the rule of the agent it follows this way, so
// either may add tools that must not run twice but never lose one, and a
// person asked about calls in doubt above is asked below too.
func (h *Harness) AddOnce(from *Harness) {
	for _, g := range from.AtMostOnce {
		if !slices.Contains(h.AtMostOnce, g) {
			h.AtMostOnce = append(h.AtMostOnce, g)
		}
	}
	if from.AsksInDoubt() {
		h.InDoubt = InDoubtAsk
	}
}

// onceRule checks harness.at_most_once (each a non-empty tool-name glob,
// none twice) and harness.in_doubt (report or ask) at prefix p, and a
// helper template's at_most_once at hp.
func (v *validator) onceRule(p string, h *Harness, hp string, helper []string) {
	v.globs(p+"at_most_once", h.AtMostOnce)
	v.globs(hp, helper)
	switch h.InDoubt {
	case "", InDoubtReport, InDoubtAsk:
	default:
		v.fail(p+"in_doubt", fmt.Errorf("%q is not report or ask", h.InDoubt))
	}
}

// globs checks a list of tool-name globs.
func (v *validator) globs(p string, globs []string) {
	seen := map[string]bool{}
	for i, g := range globs {
		at := fmt.Sprintf("%s[%d]", p, i)
		switch _, err := path.Match(g, ""); {
		case g == "":
			v.fail(at, fmt.Errorf("empty tool name glob"))
		case err != nil:
			v.fail(at, fmt.Errorf("tool name glob %q: %v", g, err))
		case seen[g]:
			v.fail(at, fmt.Errorf("duplicate tool name glob %q", g))
		}
		seen[g] = true
	}
}
