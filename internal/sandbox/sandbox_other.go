//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"io"
	"runtime"
)

// Sandbox is unavailable off Linux (New always fails).
type Sandbox struct{}

// New fails: only Linux can sandbox tools.
func New(Options) (*Sandbox, error) {
	return nil, fmt.Errorf("%w: %s has no tool sandbox", ErrUnavailable, runtime.GOOS)
}

func (s *Sandbox) Info() Info   { return Info{} }
func (s *Sandbox) Close() error { return nil }

// Run is never reached: New fails.
func (s *Sandbox) Run(context.Context, Request, io.Writer) (Exit, error) {
	return Exit{}, ErrUnavailable
}

func runRole(string, string) int { return 127 }
