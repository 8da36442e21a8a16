// Package ops is a process's operations listener: /healthz, /readyz and
// /metrics on an address of its own, for processes that have no HTTP API
// (workers) and for probes and scrapers that should not need the API's
// token. It serves nothing that changes state. It also holds the client
// side of those probes: Check, and the `healthcheck` command of each binary.
//
// /healthz answers 200 while the process is up. /readyz answers 200 when
// the process can do its work, else 503 with the reason.
package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server timeouts: probes and scrapes are small and quick.
const (
	readHeaderTimeout = 5 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = time.Minute
	// ReadyTimeout bounds one readiness check.
	ReadyTimeout = 5 * time.Second
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on; port 0 picks a free one.
	Addr string
	// Ready reports readiness: nil is 200 ready, an error 503 with its text.
	// Nil: always ready once listening.
	Ready func(ctx context.Context) error
	// Metrics serves /metrics; nil leaves it 404.
	Metrics http.Handler
	// Logger receives serve errors; default discard.
	Logger *slog.Logger
}

// Server is a running operations listener.
type Server struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// Handler returns the routes, for embedding in another server.
func Handler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if cfg.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
			defer cancel()
			if err := cfg.Ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		io.WriteString(w, "ready\n")
	})
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	return mux
}

// Start listens on cfg.Addr and serves in the background until Shutdown.
func Start(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		return nil, errors.New("ops: no listen address")
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("ops: listen: %w", err)
	}
	s := &Server{ln: ln, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), srv: &http.Server{
		Handler:           Handler(cfg),
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
	}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("ops listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return s, nil
}

// Addr is the address it listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops listening and waits, bounded by ctx, for requests in flight.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }
