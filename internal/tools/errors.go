package tools

import "errors"

// Sentinel errors of the package; always wrapped with detail.
var (
	ErrUnknownTool = errors.New("unknown tool")
	ErrBadArgs     = errors.New("bad arguments")
)
