// Package tools defines what a tool is to Formica: the Tool interface, how a
// helper's direct tools derive from its parent's (Direct, under a
// policy.Visibility) and merge with the shims, the texts a gated call
// answers with, and the `agent` tool that spawns helpers. The policies
// themselves are data in package policy.
//
// The base harness tools (read_file, bash, ...) live in subpackage base.
package tools
