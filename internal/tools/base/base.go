package base

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/tools"
)

// Tool names, in the canonical order New returns them.
const (
	ReadFileName  = "read_file"
	WriteFileName = "write_file"
	EditFileName  = "edit_file"
	ListDirName   = "list_dir"
	GlobName      = "glob"
	GrepName      = "grep"
	BashName      = "bash"
)

var names = []string{ReadFileName, WriteFileName, EditFileName, ListDirName, GlobName, GrepName, BashName}

// Names returns the base tool names in canonical order (a fresh slice).
func Names() []string { return slices.Clone(names) }

// Defaults applied by New to zero Config fields.
const (
	DefaultBashTimeout    = 2 * time.Minute
	DefaultBashMaxTimeout = 10 * time.Minute
	DefaultOutputCap      = 30000 // bytes
)

// Fixed limits of the tools.
const (
	readDefaultLines = 2000    // read_file lines when no limit is given
	maxLineBytes     = 2000    // longer lines are cut in read_file and grep output
	maxListEntries   = 1000    // list_dir entries shown
	maxGlobResults   = 1000    // glob paths shown
	maxGrepMatches   = 500     // grep lines shown
	maxGrepLineBytes = 1 << 20 // grep matches within the first MiB of a line
)

// providerKeys may never be passed to bash, even through Config.PassEnv.
var providerKeys = []string{
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "GEMINI_API_KEY",
	"GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "COHERE_API_KEY",
	"DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "XAI_API_KEY", "TOGETHER_API_KEY",
}

// Config configures the base tools. Zero fields take the defaults above.
type Config struct {
	// Cwd is the harness working directory. Required; it must exist and be a
	// directory. New resolves it to an absolute, symlink-free path, and every
	// file tool is confined to it.
	Cwd string
	// Tools names the tools to build (see Names). Nil means all of them; an
	// unknown name is an error wrapping tools.ErrUnknownTool. Whatever the
	// order given, New returns the tools in canonical order, each once.
	Tools []string
	// BashTimeout is bash's timeout when the call gives no timeout_ms
	// (default DefaultBashTimeout, or BashMaxTimeout when that is smaller).
	BashTimeout time.Duration
	// BashMaxTimeout caps any timeout_ms a call asks for (default
	// DefaultBashMaxTimeout). BashTimeout may not exceed it.
	BashMaxTimeout time.Duration
	// OutputCap caps, in bytes, what bash, read_file, grep, glob and
	// list_dir return (default DefaultOutputCap). Truncation is always said.
	OutputCap int
	// PassEnv names environment variables copied from this process into
	// bash's otherwise minimal environment (PATH, HOME, LANG, LC_ALL, TMPDIR,
	// TERM). A passed name overrides the minimal value. Model-provider keys
	// (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) are refused.
	PassEnv []string
	// Sandbox confines every bash call (see internal/sandbox); nil runs bash
	// unconfined, as a process group of this process's user.
	Sandbox *sandbox.Sandbox
	// Network lets sandboxed bash calls use the network (when the sandbox
	// allows it).
	Network bool
	// Limits bound each sandboxed bash call (below the sandbox's ceiling).
	Limits sandbox.Limits
}

// harness is the state shared by the tools of one New call: its Config
// with the defaults applied; immutable.
type harness struct {
	Config
	root string // absolute, symlink-free cwd
}

// New validates cfg and returns the selected base tools in canonical order.
// Every returned tool also implements tools.Subjecter. The tools are safe for
// concurrent use.
func New(cfg Config) ([]tools.Tool, error) {
	root, err := resolveRoot(cfg.Cwd)
	if err != nil {
		return nil, fmt.Errorf("%w: cwd: %w", ErrBadConfig, err)
	}
	h := &harness{Config: cfg, root: root}
	h.PassEnv = nil // the checked names of cfg.PassEnv, each once
	switch {
	case h.BashTimeout < 0:
		return nil, fmt.Errorf("%w: negative BashTimeout %v", ErrBadConfig, h.BashTimeout)
	case h.BashMaxTimeout < 0:
		return nil, fmt.Errorf("%w: negative BashMaxTimeout %v", ErrBadConfig, h.BashMaxTimeout)
	case h.OutputCap < 0:
		return nil, fmt.Errorf("%w: negative OutputCap %d", ErrBadConfig, h.OutputCap)
	}
	if h.BashMaxTimeout == 0 {
		h.BashMaxTimeout = max(DefaultBashMaxTimeout, h.BashTimeout)
	}
	if h.BashTimeout == 0 {
		h.BashTimeout = min(DefaultBashTimeout, h.BashMaxTimeout)
	}
	if h.BashTimeout > h.BashMaxTimeout {
		return nil, fmt.Errorf("%w: BashTimeout %v exceeds BashMaxTimeout %v", ErrBadConfig, h.BashTimeout, h.BashMaxTimeout)
	}
	if h.OutputCap == 0 {
		h.OutputCap = DefaultOutputCap
	}
	for _, name := range cfg.PassEnv {
		switch {
		case name == "" || strings.ContainsAny(name, "=\x00"):
			return nil, fmt.Errorf("%w: PassEnv: invalid variable name %q", ErrBadConfig, name)
		case slices.Contains(providerKeys, name):
			return nil, fmt.Errorf("%w: PassEnv: %s is a model-provider key and is never passed to bash", ErrBadConfig, name)
		}
		if !slices.Contains(h.PassEnv, name) {
			h.PassEnv = append(h.PassEnv, name)
		}
	}

	for _, n := range cfg.Tools {
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("%w: %q (base tools: %s)", tools.ErrUnknownTool, n, strings.Join(names, ", "))
		}
	}
	var out []tools.Tool
	for _, n := range names {
		if cfg.Tools == nil || slices.Contains(cfg.Tools, n) {
			out = append(out, h.build(n))
		}
	}
	return out, nil
}

func (h *harness) build(name string) tools.Tool {
	t := func(desc string, ps []param) tool {
		return tool{name: name, desc: desc, params: ps, schema: schemaOf(ps), h: h}
	}
	switch name {
	case ReadFileName:
		return &readFile{pathTool{t(readFileDesc, readFileParams)}}
	case WriteFileName:
		return &writeFile{pathTool{t(writeFileDesc, writeFileParams)}}
	case EditFileName:
		return &editFile{pathTool{t(editFileDesc, editFileParams)}}
	case ListDirName:
		return &listDir{pathTool{t(listDirDesc, listDirParams)}}
	case GlobName:
		return &globTool{t(globDesc, globParams)}
	case GrepName:
		return &grepTool{t(grepDesc, grepParams)}
	case BashName:
		return &bashTool{t(bashDesc, bashParams)}
	}
	panic("base: no tool " + name) // unreachable: names are checked by New
}

// tool is one base tool: what a model is told about it, and the harness it
// acts in.
type tool struct {
	name, desc string
	params     []param
	schema     json.RawMessage
	h          *harness
}

func (t *tool) Name() string        { return t.name }
func (t *tool) Description() string { return t.desc }

// Schema returns the JSON Schema of the arguments, shared: do not modify it.
func (t *tool) Schema() json.RawMessage { return t.schema }
