package mcp

import "errors"

// Sentinel errors of the package; always wrapped with detail.
var (
	// ErrBadConfig: the server configuration file is malformed.
	ErrBadConfig = errors.New("bad MCP server configuration")
	// ErrUnknownServer: a spec names a server this worker does not have.
	ErrUnknownServer = errors.New("unknown MCP server")
	// ErrServer: a server could not be started or reached, or stopped.
	ErrServer = errors.New("MCP server failed")
)
