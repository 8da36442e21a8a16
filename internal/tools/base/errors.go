package base

import "errors"

// Sentinel errors of the package; always wrapped with detail. Bad tool
// arguments wrap tools.ErrBadArgs and unknown tool names tools.ErrUnknownTool.
var (
	// ErrBadConfig: a Config field is invalid (New).
	ErrBadConfig = errors.New("bad config")
	// ErrOutsideCwd: a path resolves, symlinks included, outside the harness cwd.
	ErrOutsideCwd = errors.New("path outside the working directory")
	// ErrBinaryFile: a text tool was pointed at a binary file.
	ErrBinaryFile = errors.New("binary file")
	// ErrHardLink: a file tool was pointed at a file with more than one hard
	// link; a second name may be a file outside cwd (see openRegular).
	ErrHardLink = errors.New("file has more than one hard link")
)
