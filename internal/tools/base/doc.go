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
// bash runs `bash -c` (or `sh -c` where there is no bash) in the cwd, in its
// own process group, with a timeout, an output cap and a minimal environment
// that never carries the parent's provider keys. The whole process group is
// killed on timeout, on ctx cancellation and when the command finishes, so
// background children never outlive the call. bash is not a sandbox: it
// starts in the cwd but can reach whatever the OS user can; what it may run is
// for the permission policy to decide.
//
// Known limits: hard links are indistinguishable from regular files, so a
// hard link inside the cwd to a file outside is followed; os.Root does not
// stop a bind mount either.
//
// Every tool implements tools.Subjecter so permission rules can match a call:
// the cwd-relative path (after symlink resolution) for file tools and grep,
// the pattern for glob, the command for bash.
//
// Results are plain text meant for a model; failures are returned as errors
// whose text says what went wrong and, where it helps, what to do instead.
package base
