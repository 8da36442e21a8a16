package runner

import (
	"errors"

	"github.com/formica-run/formica/internal/thread"
)

// Sentinel errors of the runner.
var (
	ErrBadRequest = errors.New("bad run request")
	ErrMaxTurns   = errors.New("max turns reached")
	ErrSchema     = errors.New("output did not match schema")
	// ErrContextWindow: a request cannot be made to fit the model's
	// context window.
	ErrContextWindow = errors.New("context window exceeded")
	// ErrUnknownAgent: a handoff names an agent the catalog lacks.
	ErrUnknownAgent = thread.ErrUnknownAgent
	// ErrNoMCP: a spec names MCP servers and this process has none.
	ErrNoMCP = errors.New("unknown MCP server")
)
