package spec

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

// namePattern is DESIGN's one-word name: letters, digits, '-', '_', '.'; 1–64 chars.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidName reports whether s is a valid agent or helper name.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// Validate checks the whole file and reports every problem, joined, each a
// *FieldError naming its field path ("agents[1].harness.permissions.rules[0].decision").
//
// It checks: names (required, one word, unique across the root and agents[]),
// model references, max_turns >= 0, context windows (0 or at least
// MinContextWindow), tool name lists, permission policies, the
// helper's tool policy (`only` needs restrict), the at-most-once tool
// globs and in_doubt (report or ask), handoff targets (an agent of
// this file, not itself) and that output schemas compile.
func (f *File) Validate() error {
	v := &validator{}
	seen := map[string]string{}
	check := func(prefix string, a *Agent) {
		v.agent(prefix, a)
		if a.Name == "" {
			return
		}
		if first, dup := seen[a.Name]; dup {
			v.fail(prefix+"name", fmt.Errorf("duplicate agent name %q (also %s)", a.Name, first))
			return
		}
		seen[a.Name] = prefix + "name"
	}
	handoffs := func(prefix string, a *Agent) {
		dup := map[string]bool{}
		for j, h := range a.Handoffs {
			p := fmt.Sprintf("%shandoffs[%d]", prefix, j)
			switch {
			case h == a.Name:
				v.fail(p, fmt.Errorf("agent %q cannot hand off to itself", h))
			case seen[h] == "":
				v.fail(p, fmt.Errorf("unknown agent %q (handoffs name agents of this file)", h))
			case dup[h]:
				v.fail(p, fmt.Errorf("duplicate handoff %q", h))
			}
			dup[h] = true
		}
	}
	// Every name is known before any handoff is checked.
	for _, pass := range []func(string, *Agent){check, handoffs} {
		pass("", &f.Agent)
		for i := range f.Agents {
			pass(fmt.Sprintf("agents[%d].", i), &f.Agents[i])
		}
	}
	return errors.Join(v.errs...)
}

type validator struct{ errs []error }

func (v *validator) fail(path string, err error) {
	v.errs = append(v.errs, &FieldError{Path: path, Err: err})
}

func (v *validator) agent(p string, a *Agent) {
	switch {
	case a.Name == "":
		v.fail(p+"name", errors.New("required"))
	case !ValidName(a.Name):
		v.fail(p+"name", fmt.Errorf("%q is not one word of letters, digits, '-', '_' or '.' (1-64 chars)", a.Name))
	}
	v.modelRef(p+"model", a.Model)
	if a.MaxTurns < 0 {
		v.fail(p+"max_turns", fmt.Errorf("%d is negative", a.MaxTurns))
	}
	v.window(p+"context_window", a.ContextWindow)
	v.names(p+"tools", a.Tools)
	v.schema(p+"output_schema", a.OutputSchema)
	v.names(p+"harness.tools", a.Harness.Tools)
	v.servers(p+"harness.mcp", a.Harness.MCP)
	v.permissions(p+"harness.permissions", a.Harness.Permissions)
	v.sandbox(p+"harness.sandbox.", a.Harness.Sandbox)
	v.onceRule(p+"harness.", &a.Harness, p+"helper.at_most_once", a.Helper.AtMostOnce)
	h := &a.Helper
	v.modelRef(p+"helper.model", h.Model)
	v.window(p+"helper.context_window", h.ContextWindow)
	v.schema(p+"helper.output_schema", h.OutputSchema)
	vis, err := policy.ParseVisibility(string(h.Tools.Policy))
	if err != nil {
		v.fail(p+"helper.tools.policy", err)
	} else if len(h.Tools.Only) > 0 && vis != policy.Restrict {
		v.fail(p+"helper.tools.only", fmt.Errorf("only applies to policy restrict, not %s", vis))
	}
	if err := a.Budget.Validate(); err != nil {
		v.fail(p+"budget", errors.New("amounts must not be negative"))
	}
	if err := h.Budget.Validate(); err != nil {
		v.fail(p+"helper.budget", errors.New("amounts must not be negative"))
	}
	v.names(p+"helper.tools.only", h.Tools.Only)
	v.names(p+"helper.tools.add", h.Tools.Add)
}

// MinContextWindow is the smallest context window a spec may set: below
// it a conversation cannot hold a system prompt, a task and a turn.
const MinContextWindow = 1024

// window checks a context window: 0 (the model's default) or at least
// MinContextWindow tokens.
func (v *validator) window(p string, tokens int64) {
	switch {
	case tokens < 0:
		v.fail(p, fmt.Errorf("%d is negative", tokens))
	case tokens > 0 && tokens < MinContextWindow:
		v.fail(p, fmt.Errorf("%d tokens is too small (at least %d, or 0 for the model's default)", tokens, MinContextWindow))
	}
}

func (v *validator) modelRef(p, ref string) {
	if ref == "" {
		return
	}
	if _, err := model.ParseRef(ref); err != nil {
		v.fail(p, err)
	}
}

// serverPattern is an MCP server name: part of tool names, which the model
// providers limit to letters, digits, '_' and '-'; "__" separates the parts
// of mcp__<server>__<tool>, so a name may not contain it.
var serverPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ValidServerName reports whether s can name an MCP server.
func ValidServerName(s string) bool {
	return serverPattern.MatchString(s) && !strings.Contains(s, "__")
}

// servers checks a list of MCP server names: each valid, none twice.
func (v *validator) servers(p string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case !ValidServerName(n):
			v.fail(fmt.Sprintf("%s[%d]", p, i), fmt.Errorf("%q is not an MCP server name (1-32 letters, digits, '_' or '-', without \"__\")", n))
		case seen[n]:
			v.fail(fmt.Sprintf("%s[%d]", p, i), fmt.Errorf("duplicate MCP server %q", n))
		}
		seen[n] = true
	}
}

// names checks a list of tool names: none empty, none twice.
func (v *validator) names(p string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case n == "":
			v.fail(fmt.Sprintf("%s[%d]", p, i), errors.New("empty tool name"))
		case seen[n]:
			v.fail(fmt.Sprintf("%s[%d]", p, i), fmt.Errorf("duplicate tool %q", n))
		}
		seen[n] = true
	}
}

// permissions checks each field itself, for precise paths, then defers to
// PermissionPolicy.Validate so no rule it knows is missed.
func (v *validator) permissions(p string, pol policy.Permission) {
	before := len(v.errs)
	if pol.Default != "" {
		if _, err := policy.ParseDecision(string(pol.Default)); err != nil {
			v.fail(p+".default", err)
		}
	}
	for i, r := range pol.Rules {
		rp := fmt.Sprintf("%s.rules[%d]", p, i)
		if r.Tool == "" {
			v.fail(rp+".tool", fmt.Errorf("%w: required", policy.ErrBadPolicy))
		} else if _, err := path.Match(r.Tool, ""); err != nil {
			v.fail(rp+".tool", fmt.Errorf("%w: glob %q: %v", policy.ErrBadPolicy, r.Tool, err))
		}
		if _, err := policy.ParseDecision(string(r.Decision)); err != nil {
			v.fail(rp+".decision", err)
		}
	}
	if len(v.errs) == before {
		if err := pol.Validate(); err != nil {
			v.fail(p, err)
		}
	}
}

func (v *validator) schema(p string, raw []byte) {
	if len(raw) == 0 {
		return
	}
	if _, err := CompileSchema(raw); err != nil {
		v.fail(p, err)
	}
}
