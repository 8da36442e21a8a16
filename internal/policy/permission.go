package policy

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
)

// ErrBadPolicy wraps every malformed permission or visibility policy.
var ErrBadPolicy = errors.New("bad policy")

// Decision is what a permission policy says about a tool call.
type Decision string

// Decisions, from most to least permissive.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// ParseDecision checks s is one of allow, ask, deny.
func ParseDecision(s string) (Decision, error) {
	switch d := Decision(s); d {
	case Allow, Ask, Deny:
		return d, nil
	}
	return "", fmt.Errorf("%w: decision %q (want allow, ask or deny)", ErrBadPolicy, s)
}

func (d Decision) strictness() int {
	switch d {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2 // deny, and anything unknown is treated as deny
}

// Rule matches tool calls by tool-name glob and, optionally, an argument
// pattern, and gives a decision.
//
// Tool is a glob over the tool name ("*", "read_*"). Match, when set, is a glob
// over the call's subject (see tools.Subjecter): the command for bash, the path for
// file tools, where "*" also spans "/" and spaces, so "git *" is a command
// prefix and "src/*" any path under src. A rule with a Match never matches a
// tool that has no subject.
type Rule struct {
	Tool     string   `json:"tool" yaml:"tool" msgpack:"tool"`
	Match    string   `json:"match,omitempty" yaml:"match,omitempty" msgpack:"match,omitempty"`
	Decision Decision `json:"decision" yaml:"decision" msgpack:"decision"`
}

// Permission is an ordered rule list and a default: the first matching
// rule decides. A zero policy allows everything.
type Permission struct {
	Default Decision `json:"default,omitempty" yaml:"default,omitempty" msgpack:"default,omitempty"`
	Rules   []Rule   `json:"rules,omitempty" yaml:"rules,omitempty" msgpack:"rules,omitempty"`
}

// Validate reports the first malformed rule.
func (p Permission) Validate() error {
	if p.Default != "" {
		if _, err := ParseDecision(string(p.Default)); err != nil {
			return fmt.Errorf("default: %w", err)
		}
	}
	for i, r := range p.Rules {
		if r.Tool == "" {
			return fmt.Errorf("%w: rule %d has no tool", ErrBadPolicy, i+1)
		}
		if _, err := path.Match(r.Tool, ""); err != nil {
			return fmt.Errorf("%w: rule %d: tool glob %q: %v", ErrBadPolicy, i+1, r.Tool, err)
		}
		if _, err := ParseDecision(string(r.Decision)); err != nil {
			return fmt.Errorf("rule %d: %w", i+1, err)
		}
	}
	return nil
}

// Decide returns the decision for a call of tool with the given subject
// ("" when the tool has none).
func (p Permission) Decide(tool, subject string) Decision {
	for _, r := range p.Rules {
		if ok, _ := path.Match(r.Tool, tool); !ok {
			continue
		}
		if r.Match != "" && (subject == "" || !globMatch(r.Match, subject)) {
			continue
		}
		return r.Decision
	}
	return cmp.Or(p.Default, Allow)
}

// Permissions is the stack of policies a thread runs under: its ancestors'
// first, its own last. The strictest decision of all layers wins, so a helper
// can narrow what its parent may do but never widen it.
type Permissions []Permission

// Narrow returns the stack with p added as the innermost layer.
func (ps Permissions) Narrow(p Permission) Permissions {
	return append(slices.Clip(ps), p)
}

// Decide returns the strictest decision of every layer; an empty stack allows.
func (ps Permissions) Decide(tool, subject string) Decision {
	d := Allow
	for _, p := range ps {
		if pd := p.Decide(tool, subject); pd.strictness() > d.strictness() {
			d = pd
		}
	}
	return d
}

// globMatch reports whether s matches pattern, where '*' matches any run of
// characters (slashes and spaces included) and '?' any one character.
func globMatch(pattern, s string) bool {
	// Iterative wildcard match with backtracking to the last star.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
