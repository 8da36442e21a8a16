// Package api is the coordinator's HTTP API: submit, list, inspect, follow
// (Server-Sent Events) and cancel runs; answer approvals; list workers;
// health and readiness probes; and an OpenAPI 3.1 document of all of it at
// /v1/openapi.json.
//
// The API reaches the rest of the system only through Backend, which it
// owns. Errors are JSON, {"error": {"code": ..., "message": ...}}, with a
// stable code per status (see the OpenAPI document for the list).
//
// The same handler serves the dashboard (internal/dashboard) at / with its
// assets under /assets/, and /login and /logout for browsers.
//
// Security: with Config.Token set, every route but /healthz, /readyz and
// /login needs "Authorization: Bearer <token>" or a session cookie from
// /login (session.go). Without a token, New accepts only
// loopback addresses, and requests must name a loopback host (localhost,
// 127.0.0.0/8, ::1) so a web page cannot reach the API through DNS
// rebinding. Cross-origin browser writes are refused in both cases
// (http.CrossOriginProtection), so a page cannot submit runs either.
package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/metrics"
)

// Defaults for a zero Config.
const (
	DefaultAddr      = "127.0.0.1:8080"
	DefaultMaxBody   = 1 << 20
	DefaultKeepAlive = 15 * time.Second
	// DefaultMaxStreams is how many event streams a server serves at once.
	DefaultMaxStreams = 10_000
)

// Timeouts of the HTTP server. Event streams replace the write timeout with
// a deadline per event (see events.go); net/http itself lifts the read
// deadline once a request's body has been read.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// requestTimeout bounds the backend calls of every request but event
	// streams; a backend that does not answer in time gives a 503.
	requestTimeout = 30 * time.Second
)

// Config configures a Server. The zero value serves on 127.0.0.1:8080
// without a token.
type Config struct {
	// Addr is the TCP address Start listens on; default DefaultAddr. Use
	// port 0 for any free port (see Server.Addr). Without a Token it must be
	// a loopback address: localhost, 127.0.0.0/8 or ::1.
	Addr string
	// Token, when set, is the bearer token every route but /healthz and
	// /readyz requires. It must not start or end with white space.
	Token string
	// MaxBody bounds request bodies in bytes; default DefaultMaxBody.
	// Larger bodies get 413 too_large.
	MaxBody int64
	// KeepAlive is the period of the ": keepalive" comments on an event
	// stream that has nothing else to send; default DefaultKeepAlive.
	KeepAlive time.Duration
	// Logger receives access logs (debug), failures and panics; default
	// discard.
	Logger *slog.Logger
	// Metrics, when set, counts requests and open event streams and is
	// served at /metrics (behind the token, like the API).
	Metrics *metrics.Metrics
	// TraceURL is a link template to a run's trace ({trace_id} replaced):
	// run records of traced runs are served with it filled in as trace_url.
	TraceURL string
	// MaxStreams bounds the event streams (GET /v1/runs/{id}/events) served
	// at once; default DefaultMaxStreams. Past it a new stream is refused
	// at once with 503 unavailable and Retry-After, before anything else.
	MaxStreams int
	// CORSOrigins are the web origins (scheme://host[:port]) whose pages may
	// call the API from a browser: their requests pass the cross-origin
	// check and their answers carry the CORS headers. None by default.
	CORSOrigins []string
}

// Server is the HTTP API. Handler serves it on any http.Server; Start and
// Shutdown run it on its own.
type Server struct {
	cfg Config
	b   Backend
	log *slog.Logger
	srv *http.Server
	// sess issues and checks browser sessions; nil without a token.
	sess *sessions
	// streams ends when Shutdown begins, ending every event stream (clients
	// reconnect with Last-Event-ID).
	streams    context.Context
	endStreams context.CancelFunc
	// open counts the event streams being served (at most
	// Config.MaxStreams).
	open atomic.Int64

	mu       sync.Mutex
	state    int // stateNew, stateStarted or stateClosed
	ln       net.Listener
	served   chan struct{} // closed when Serve returns
	serveErr error
}

const (
	stateNew = iota
	stateStarted
	stateClosed
)

// New checks cfg, fills in its defaults and returns a server for b. It
// refuses (ErrInsecure) an address beyond loopback without a token.
func New(cfg Config, b Backend) (*Server, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: no backend", ErrConfig)
	}
	cfg.Addr = cmp.Or(cfg.Addr, DefaultAddr)
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %v", ErrConfig, cfg.Addr, err)
	}
	if cfg.Token == "" && !isLoopback(host) {
		return nil, fmt.Errorf("%w: %q is reachable from other machines; set a token or listen on 127.0.0.1, ::1 or localhost",
			ErrInsecure, cfg.Addr)
	}
	if cfg.Token != strings.TrimSpace(cfg.Token) {
		return nil, fmt.Errorf("%w: the token starts or ends with white space", ErrConfig)
	}
	switch {
	case cfg.MaxBody < 0:
		return nil, fmt.Errorf("%w: negative MaxBody %d", ErrConfig, cfg.MaxBody)
	case cfg.KeepAlive < 0:
		return nil, fmt.Errorf("%w: negative KeepAlive %v", ErrConfig, cfg.KeepAlive)
	case cfg.MaxStreams < 0:
		return nil, fmt.Errorf("%w: negative MaxStreams %d", ErrConfig, cfg.MaxStreams)
	}
	cfg.MaxBody = cmp.Or(cfg.MaxBody, DefaultMaxBody)
	cfg.KeepAlive = cmp.Or(cfg.KeepAlive, DefaultKeepAlive)
	cfg.MaxStreams = cmp.Or(cfg.MaxStreams, DefaultMaxStreams)
	for _, o := range cfg.CORSOrigins {
		if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("%w: CORS origin: %v", ErrConfig, err)
		}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	s := &Server{cfg: cfg, b: b, log: cfg.Logger}
	if cfg.Token != "" {
		s.sess = newSessions(cfg.Token, time.Now)
	}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.srv = &http.Server{
		Handler:           s.buildHandler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Check reports why New would refuse cfg, without a backend, so a program
// can refuse a bad configuration before it starts anything else.
func Check(cfg Config) error {
	_, err := New(cfg, checkOnly{})
	return err
}

// checkOnly stands in for the backend in Check; New calls none of its methods.
type checkOnly struct{ Backend }

// isLoopback reports whether host names only this machine: "localhost" or a
// loopback IP. The empty host (":8080") means every interface.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.WithZone("").Unmap().IsLoopback()
}

// Handler returns the API's handler, middleware included, to serve on an
// http.Server of the caller's (Shutdown still ends its event streams).
func (s *Server) Handler() http.Handler { return s.srv.Handler }

// Start listens on Config.Addr and serves in the background. It returns once
// the listener is open, so Addr is then the real address.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateNew {
		return ErrServerClosed
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	s.ln, s.state, s.served = ln, stateStarted, make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("api: serving stopped", "err", err)
			s.mu.Lock()
			s.serveErr = err
			s.mu.Unlock()
		}
	}()
	s.log.Info("api: listening", "addr", ln.Addr().String(), "auth", s.cfg.Token != "")
	return nil
}

// Addr is the address the server listens on once started (the real port
// when Config.Addr asked for port 0), else Config.Addr.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Addr
}

// Shutdown ends every event stream, stops accepting connections and waits
// for running requests until ctx ends; then it closes what is left. It is
// safe to call more than once, and without Start.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	prev := s.state
	s.state = stateClosed
	s.mu.Unlock()
	s.endStreams()
	if prev != stateStarted {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	<-s.served
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.serveErr)
}
