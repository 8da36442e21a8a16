// Package logging builds the slog loggers of Formica's programs.
package logging

import (
	"fmt"
	"io"
	"log/slog"
)

// New returns a text logger at the named level (debug, info, warn, error).
func New(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
