package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
)

// levelTrace is below slog's Debug: the server's protocol trace is far
// noisier than its debug output.
const levelTrace = slog.LevelDebug - 4

// discardLogger is the default: a library stays quiet unless given a logger.
var discardLogger = slog.New(slog.DiscardHandler)

// serverLogger adapts the nats-server Logger interface to slog. It also
// remembers the first Fatalf: an embedded server reports start-up failures
// (port in use, unusable store dir) only through its logger and then never
// becomes ready, so StartServer watches for it instead of waiting out its
// whole bound.
type serverLogger struct {
	log   *slog.Logger
	once  sync.Once
	fatal chan error // receives the first Fatalf; buffered, never closed
}

func newServerLogger(l *slog.Logger) *serverLogger {
	return &serverLogger{
		log:   cmp.Or(l, discardLogger).With("component", "nats-server"),
		fatal: make(chan error, 1),
	}
}

func (s *serverLogger) logf(level slog.Level, format string, v []any) {
	s.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
}

func (s *serverLogger) Noticef(format string, v ...any) { s.logf(slog.LevelInfo, format, v) }
func (s *serverLogger) Warnf(format string, v ...any)   { s.logf(slog.LevelWarn, format, v) }
func (s *serverLogger) Errorf(format string, v ...any)  { s.logf(slog.LevelError, format, v) }
func (s *serverLogger) Debugf(format string, v ...any)  { s.logf(slog.LevelDebug, format, v) }
func (s *serverLogger) Tracef(format string, v ...any)  { s.logf(levelTrace, format, v) }

// Fatalf logs at error level and never exits: the process, not the embedded
// server, decides when to stop.
func (s *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.log.Error(msg, "fatal", true)
	s.once.Do(func() { s.fatal <- errors.New(msg) })
}

// levels reports which of the server's debug and trace output the slog
// handler would keep, so the server does not format lines nobody reads.
func (s *serverLogger) levels() (debug, trace bool) {
	ctx := context.Background()
	return s.log.Enabled(ctx, slog.LevelDebug), s.log.Enabled(ctx, levelTrace)
}

// connHandlers returns the connection callbacks every Formica connection
// gets. Asynchronous errors are the only place a permission violation or a
// slow consumer shows up (docs/nats.md), so they are logged at error/warn level.
func connHandlers(l *slog.Logger, name string) []nats.Option {
	log := cmp.Or(l, discardLogger).With("component", "nats", "conn", name)
	return []nats.Option{
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			attrs := []any{"err", err}
			if sub != nil {
				attrs = append(attrs, "subject", sub.Subject)
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				if sub != nil {
					if msgs, bytes, perr := sub.Pending(); perr == nil {
						attrs = append(attrs, "pending_msgs", msgs, "pending_bytes", bytes)
					}
				}
				log.Warn("nats slow consumer: messages dropped", attrs...)
				return
			}
			log.Error("nats async error", attrs...)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
				return
			}
			log.Debug("nats disconnected")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("nats connection closed", "err", err)
				return
			}
			log.Debug("nats connection closed")
		}),
		nats.LameDuckModeHandler(func(nc *nats.Conn) {
			log.Info("nats server entering lame duck mode", "server", nc.ConnectedServerName())
		}),
	}
}
