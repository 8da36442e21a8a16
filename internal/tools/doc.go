// Package tools defines what a tool is to Formica and the rules around tools:
// which ones a helper sees (visibility policies and the shim merge), whether a
// call may run (permission policies and approvals), and the `agent` tool that
// spawns helpers.
//
// The base harness tools (read_file, bash, ...) live in subpackage base.
package tools
