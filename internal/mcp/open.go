package mcp

import (
	"log/slog"

	"github.com/formica-run/formica/internal/sandbox"
)

// FlagUsage is the help text of every binary's --mcp-config flag.
const FlagUsage = "MCP servers `file` in the mcpServers JSON shape; their tools are offered to specs that name the servers in harness.mcp"

// Open loads the --mcp-config file at path into a pool whose stdio servers
// run in sb (nil: unconfined); an empty path is no servers (a nil pool).
func Open(path string, sb *sandbox.Sandbox, logger *slog.Logger) (*Pool, error) {
	if path == "" {
		return nil, nil
	}
	ss, err := Load(path)
	if err != nil {
		return nil, err
	}
	return New(Config{Servers: ss, Sandbox: sb, Logger: logger})
}
