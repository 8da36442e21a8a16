// Package logging builds the slog loggers of Formica's programs: text or
// JSON lines, each line logged with a context that carries a recording
// span also carrying its trace_id and span_id, so logs and traces meet.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Formats New accepts.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Keys of the trace and span ids a line logged within a span carries.
const (
	KeyTrace = "trace_id"
	KeySpan  = "span_id"
)

// New returns a logger at the named level (debug, info, warn, error) in
// the named format (text, the default when "", or json).
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "", FormatText:
		h = slog.NewTextHandler(w, opts)
	case FormatJSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
	return slog.New(traced{h}), nil
}

// traced adds the trace and span ids of the record's context, when it
// carries a valid span context.
type traced struct{ slog.Handler }

func (h traced) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(KeyTrace, sc.TraceID().String()), slog.String(KeySpan, sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traced) WithAttrs(as []slog.Attr) slog.Handler { return traced{h.Handler.WithAttrs(as)} }

func (h traced) WithGroup(name string) slog.Handler { return traced{h.Handler.WithGroup(name)} }

// Floor returns l without the records below min: a chatty component (the
// embedded NATS server) logs only what matters unless asked for more. A
// nil l stays nil.
func Floor(l *slog.Logger, min slog.Level) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(floor{l.Handler(), min})
}

// ParseLevel reads a level name as New does.
func ParseLevel(level string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return l, nil
}

type floor struct {
	slog.Handler
	min slog.Level
}

func (h floor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h floor) WithAttrs(as []slog.Attr) slog.Handler { return floor{h.Handler.WithAttrs(as), h.min} }

func (h floor) WithGroup(name string) slog.Handler { return floor{h.Handler.WithGroup(name), h.min} }
