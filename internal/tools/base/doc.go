// Package base implements the base harness tools every Formica agent can be
// given: read_file, write_file, edit_file, list_dir, glob, grep and bash.
//
// The tools are bound to one harness working directory (Config.Cwd). File
// tools never touch anything outside it: a path is resolved against the cwd,
// symlinks included (see Confine), and refused before any read or write when
// it ends outside; the operation itself then goes through an os.Root opened on
// the cwd, so a symlink swapped in between the check and the use cannot lead
// outside either.
//
// bash runs `bash -c` (or `sh -c` where there is no bash) in the cwd with a
// timeout, an output cap and a minimal environment that never carries the
// parent's provider keys. With Config.Sandbox (internal/sandbox) each call is
// confined by the kernel: it sees the cwd, the system's programs and nothing
// else of the host, runs as an unprivileged uid without network unless
// allowed, under rlimits, and every process it starts dies with the call.
// Without a sandbox, bash runs in its own process group, which is killed on
// timeout, on ctx cancellation and when the command finishes; it then reaches
// whatever the OS user can.
//
// Hard links: a second name of a file cannot be told apart from a file of
// cwd, yet may be a link to a file outside it. The file tools therefore
// refuse to read or write a file with more than one link (ErrHardLink),
// checked on the opened descriptor, and grep skips such files. os.Root does
// not stop a bind mount.
//
// Every tool implements tools.Subjecter so permission rules can match a call:
// the cwd-relative path (after symlink resolution) for file tools and grep,
// the pattern for glob, the command for bash.
//
// Results are plain text meant for a model; failures are returned as errors
// whose text says what went wrong and, where it helps, what to do instead.
package base
