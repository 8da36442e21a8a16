// Package mcp mounts Model Context Protocol servers as harness tools.
//
// The operator defines servers on the worker, in the `mcpServers` JSON shape
// (see Parse); a submitted agent spec can only name them (harness.mcp), so no
// run can make a worker start a command of its choosing. Each server's tools
// appear as mcp__<server>__<tool>, shim tools like the base harness tools,
// under the thread's permission policy and approval route.
//
// Lifecycle: a server is started (stdio) or connected (streamable HTTP) on
// first use by a thread of a run, and the session is shared by every thread
// of that run on this worker that works in the same directory; it is closed
// when the run's last thread here ends. Isolation rule: two runs never share
// a session, so one run's server state (and a stdio server's process) is
// never seen by another. A stdio server runs in the tool sandbox when the
// worker has one: the thread's cwd read-write, the system directories and
// the server's read_only paths read-only, the tool uid, network only when
// its config says "network": true. A server that stops is started again
// once for the run; a second stop fails its calls with a clear error. Every
// call is bounded by the server's timeout: a hung server fails the call, not
// the thread.
package mcp
