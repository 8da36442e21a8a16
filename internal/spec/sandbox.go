package spec

import (
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/bytesize"
)

// Sandbox is what an agent asks of the sandbox its bash calls run in. Every
// limit is lowered to the worker's ceiling; a zero field takes the ceiling.
type Sandbox struct {
	// Network lets bash use the network; a worker started with
	// --tool-network deny refuses it all the same.
	Network bool `json:"network,omitempty" yaml:"network,omitempty" msgpack:"network,omitempty"`
	// CPU is each process's CPU time, a Go duration ("30s", "5m").
	CPU string `json:"cpu,omitempty" yaml:"cpu,omitempty" msgpack:"cpu,omitempty"`
	// Memory is each process's address space: bytes, or with a binary
	// unit ("512M", "2GiB").
	Memory string `json:"memory,omitempty" yaml:"memory,omitempty" msgpack:"memory,omitempty"`
	// Processes bounds the processes of the tool user.
	Processes int `json:"processes,omitempty" yaml:"processes,omitempty" msgpack:"processes,omitempty"`
	// FileSize is the largest file a process may write, like Memory.
	FileSize string `json:"file_size,omitempty" yaml:"file_size,omitempty" msgpack:"file_size,omitempty"`
	// Timeout is bash's wall-clock timeout when a call gives none, a Go
	// duration, capped at 10 minutes or the worker's own bash timeout,
	// whichever is longer.
	Timeout string `json:"timeout,omitempty" yaml:"timeout,omitempty" msgpack:"timeout,omitempty"`
}

// SandboxLimits are a Sandbox's limits parsed: the sandbox's own Limits,
// field for field, which the runner hands it.
type SandboxLimits struct {
	CPU       time.Duration
	Memory    int64
	Processes int
	FileSize  int64
}

// Limits parses the sandbox's limits and bash timeout (zero where unset).
func (s Sandbox) Limits() (l SandboxLimits, timeout time.Duration, err error) {
	var errs []error
	field := func(name string, err error) {
		if err != nil {
			errs = append(errs, &FieldError{Path: name, Err: err})
		}
	}
	l.CPU, err = duration(s.CPU)
	field("cpu", err)
	l.Memory, err = bytesize.Parse(s.Memory)
	field("memory", err)
	l.FileSize, err = bytesize.Parse(s.FileSize)
	field("file_size", err)
	timeout, err = duration(s.Timeout)
	field("timeout", err)
	if s.Processes < 0 {
		field("processes", fmt.Errorf("%d is negative", s.Processes))
	}
	l.Processes = s.Processes
	return l, timeout, errors.Join(errs...)
}

func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a duration like 30s or 5m", s)
	case d <= 0:
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

func (v *validator) sandbox(p string, s Sandbox) {
	if _, _, err := s.Limits(); err != nil {
		var fe *FieldError
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			if errors.As(e, &fe) {
				v.fail(p+fe.Path, fe.Err)
			}
		}
	}
}
