package sandbox

import (
	"github.com/formica-run/formica/internal/bytesize"

	"errors"
	"flag"
	"fmt"
)

// Flags are a worker's sandbox flags (cmd/worker, coordinator
// --local-workers): one definition so every binary spells them the same.
type Flags struct {
	Mode     string // --sandbox on|off
	ToolUser string // --tool-user
	Network  string // --tool-network allow|deny
	Ceiling  Limits // --tool-cpu, --tool-memory, --tool-processes, --tool-file-size
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Mode, "sandbox", "on", "run tool calls in the sandbox: on, or off (unconfined; the worker says so in its heartbeat)")
	fs.StringVar(&f.ToolUser, "tool-user", DefaultToolUser, "`uid[:gid]` or user name tool calls run as (never root)")
	fs.StringVar(&f.Network, "tool-network", "allow", "allow: specs may turn the network on (harness.sandbox.network); deny: never")
	f.Ceiling = DefaultCeiling
	fs.DurationVar(&f.Ceiling.CPU, "tool-cpu", DefaultCeiling.CPU, "ceiling of a tool process's CPU time")
	fs.Func("tool-memory", fmt.Sprintf("ceiling of a tool process's address space, e.g. 4G (default %dG)", DefaultCeiling.Memory>>30), sizeFlag(&f.Ceiling.Memory))
	fs.IntVar(&f.Ceiling.Processes, "tool-processes", DefaultCeiling.Processes, "ceiling of the tool user's processes")
	fs.Func("tool-file-size", fmt.Sprintf("ceiling of the size of a file a tool writes, e.g. 1G (default %dG)", DefaultCeiling.FileSize>>30), sizeFlag(&f.Ceiling.FileSize))
}

func sizeFlag(dst *int64) func(string) error {
	return func(s string) error {
		n, err := bytesize.Parse(s)
		if err != nil {
			return err
		}
		*dst = n
		return nil
	}
}

// Open returns the sandbox the flags ask for, or nil with --sandbox off. An
// error (wrapping ErrUnavailable when the machine cannot sandbox) means the
// worker must not start.
func (f *Flags) Open() (*Sandbox, error) {
	var deny bool
	switch f.Network {
	case "allow", "":
	case "deny":
		deny = true
	default:
		return nil, fmt.Errorf("--tool-network %q: want allow or deny", f.Network)
	}
	switch f.Mode {
	case "off":
		return nil, nil
	case "on", "":
	default:
		return nil, fmt.Errorf("--sandbox %q: want on or off", f.Mode)
	}
	s, err := New(Options{ToolUser: f.ToolUser, DenyNetwork: deny, Ceiling: f.Ceiling})
	if errors.Is(err, ErrUnavailable) {
		return nil, fmt.Errorf("%w; start with --sandbox off to run tool calls unconfined", err)
	}
	return s, err
}
