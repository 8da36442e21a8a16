// Package tools defines what a tool is to Formica: the Tool interface, how a
// helper's direct tools merge with the shims (which tools a helper keeps of
// its parent's is spec.HelperSpec's rule), the texts a gated call
// answers with, and the rules of the `agent` tool's arguments (the runner's
// loop acts on its calls). The policies themselves are data in package
// policy.
//
// The base harness tools (read_file, bash, ...) live in subpackage base.
package tools
