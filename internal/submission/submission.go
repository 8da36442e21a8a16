// Package submission checks a run before it is queued or started, so a
// mistake in what was asked (an unknown model provider, a tool that does not
// exist, a bad id, negative limits, missing credentials where they can be
// known) is one clear bad-request error at the door — API 400, CLI exit 2 —
// instead of a run that fails later. Every way into the system (the CLI's
// one-shot run, submit, the HTTP API, the coordinator that runs it) calls
// Check, ceilings on what a submission may ask included.
package submission

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/tools/base"
	"github.com/formica-run/formica/internal/webhook"
	"github.com/formica-run/formica/internal/wire"
)

// MaxWebhooks bounds the webhook URLs one submission may name.
const MaxWebhooks = 8

// ErrInvalid is wrapped by every error of Check.
var ErrInvalid = errors.New("invalid submission")

// Options is what a check knows beyond the submission itself.
type Options struct {
	// Models, when set, is how the processes that will call the models
	// open them (a one-shot run's, with its providers file): a model it
	// could not open (an unknown endpoint, missing credentials) is refused.
	// Nil skips the check, for workers whose environment is not known here.
	Models interface{ Check(ref string) error }
	// Ceilings cap what the submission may ask (its limits, budget, task
	// size and timeout); zero fields are the defaults.
	Ceilings limits.Ceilings
}

// invalid is a Check error: its text is the problem alone, and it matches
// ErrInvalid and whatever it wraps.
type invalid struct{ err error }

func (e *invalid) Error() string   { return e.err.Error() }
func (e *invalid) Unwrap() []error { return []error{ErrInvalid, e.err} }

func fail(format string, a ...any) error { return &invalid{fmt.Errorf(format, a...)} }

// Check reports the first problem of sub, or nil. Defaults are applied
// before: an empty run id or model is fine only if the caller fills it.
func Check(sub wire.RunSubmit, opt Options) error {
	if sub.RunID != "" {
		if err := ids.Check(sub.RunID); err != nil {
			return fail("run %w", err)
		}
	}
	if strings.TrimSpace(sub.Task) == "" {
		return fail("the task is empty")
	}
	if sub.Limits.MaxDepth < 0 {
		return fail("agent_max_depth must not be negative (0 means the default)")
	}
	if sub.Limits.MaxThreads < 0 {
		return fail("agent_max_threads must not be negative (0 means the default)")
	}
	if err := opt.Ceilings.Check(sub.Ask()); err != nil {
		return &invalid{err}
	}
	if len(sub.Webhooks) > MaxWebhooks {
		return fail("webhooks: %d URLs, at most %d", len(sub.Webhooks), MaxWebhooks)
	}
	for _, u := range sub.Webhooks {
		// Which URLs are allowed is the coordinator's to say; their form
		// is checked everywhere.
		if err := webhook.CheckURL(u); err != nil {
			return fail("webhooks: %s", webhook.Reason(err))
		}
	}
	if err := checkAgent("", sub.Agent, opt); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(sub.Agents)) {
		if err := checkAgent("agents."+name+".", sub.Agents[name], opt); err != nil {
			return err
		}
	}
	return nil
}

func checkAgent(p string, a spec.Agent, opt Options) error {
	if !spec.ValidName(a.Name) {
		return fail("%sname %q is not one word of letters, digits, '-', '_' or '.' (1-64 chars)", p, a.Name)
	}
	for _, m := range []struct{ field, ref string }{{"model", a.Model}, {"helper.model", a.Helper.Model}} {
		if m.ref == "" {
			continue
		}
		if err := providers.CheckRef(m.ref); err != nil {
			return fail("%s%s: %w", p, m.field, err)
		}
		if opt.Models != nil {
			if err := opt.Models.Check(m.ref); err != nil {
				return fail("%s%s: %w", p, m.field, err)
			}
		}
	}
	for _, l := range []struct {
		field  string
		names  []string
		direct bool
	}{{"tools", a.Tools, true}, {"harness.tools", a.Harness.Tools, false},
		{"helper.tools.only", a.Helper.Tools.Only, true}, {"helper.tools.add", a.Helper.Tools.Add, true}} {
		if err := checkTools(p+l.field, l.names, a.Harness.MCP, l.direct); err != nil {
			return err
		}
	}
	return nil
}

// checkTools refuses names no tool has: direct lists may name the agent
// tool and the base tools, the harness list only base tools, both the
// tools (mcp__<server>__<tool>) of the MCP servers harness.mcp names, whose
// lists only the worker knows. The harness list may also hold globs
// ("mcp__github__*"), which must be well formed.
func checkTools(field string, names, servers []string, direct bool) error {
	known := base.Names()
	if direct {
		known = append([]string{tools.AgentToolName}, known...)
	}
	for _, n := range names {
		if slices.Contains(known, n) {
			continue
		}
		if server, ok := mcpServer(n); ok {
			if !slices.Contains(servers, server) {
				return fail("%s: unknown tool %q (MCP server %q is not in harness.mcp)", field, n, server)
			}
			continue
		}
		if !direct && strings.ContainsAny(n, "*?[\\") {
			if _, err := path.Match(n, ""); err != nil {
				return fail("%s: %q is not a valid glob", field, n)
			}
			continue
		}
		return fail("%s: unknown tool %q (known: %s)", field, n, strings.Join(known, ", "))
	}
	return nil
}

// mcpServer returns the server part of an MCP tool name.
func mcpServer(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return "", false
	}
	server, tool, ok := strings.Cut(rest, "__")
	return server, ok && server != "" && tool != ""
}
