package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/dashboard"
	"github.com/formica-run/formica/internal/ids"
)

// route is one endpoint of the API.
type route struct {
	method string
	path   string // a ServeMux path, {id} for a wildcard
	// public routes need no token (the probes).
	public bool
	// stream routes run as long as the client listens: no request timeout.
	stream bool
	handle func(w http.ResponseWriter, r *http.Request) error
}

// routes is the whole API; the OpenAPI document must list exactly these.
// The dashboard's pages, /login and /logout are mounted beside them in
// buildHandler: they are for browsers, not part of the API.
func (s *Server) routes() []route {
	return []route{
		{method: http.MethodPost, path: "/v1/runs", handle: s.submitRun},
		{method: http.MethodGet, path: "/v1/runs", handle: s.listRuns},
		{method: http.MethodGet, path: "/v1/runs/{id}", handle: s.getRun},
		{method: http.MethodGet, path: "/v1/runs/{id}/events", handle: s.runEvents, stream: true},
		{method: http.MethodPost, path: "/v1/runs/{id}/cancel", handle: s.cancelRun},
		{method: http.MethodPost, path: "/v1/runs/{id}/threads/{thread}/cancel", handle: s.cancelThread},
		{method: http.MethodPost, path: "/v1/runs/{id}/resume", handle: s.resumeRun},
		{method: http.MethodGet, path: "/v1/runs/{id}/threads", handle: s.listThreads},
		{method: http.MethodGet, path: "/v1/runs/{id}/threads/{thread}", handle: s.getThread},
		{method: http.MethodGet, path: "/v1/approvals", handle: s.listApprovals},
		{method: http.MethodPost, path: "/v1/approvals/{id}", handle: s.decide},
		{method: http.MethodGet, path: "/v1/workers", handle: s.workers},
		{method: http.MethodGet, path: "/v1/assets", handle: s.assets},
		{method: http.MethodGet, path: "/v1/openapi.json", handle: s.openAPI},
		{method: http.MethodGet, path: "/healthz", handle: s.healthz, public: true},
		{method: http.MethodGet, path: "/readyz", handle: s.readyz, public: true},
		{method: http.MethodGet, path: "/metrics", handle: s.metrics},
	}
}

// metrics serves the process's Prometheus metrics.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Metrics == nil {
		return notFound("metrics are off")
	}
	s.cfg.Metrics.Handler().ServeHTTP(w, r)
	return nil
}

// buildHandler assembles the routes and the middleware, outermost first:
// access log and panic recovery, cross-origin protection, the loopback host
// check (without a token), JSON 404/405, and per route the token check.
func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		h := s.endpoint(rt)
		if !rt.public {
			h = s.requireToken(h)
		}
		mux.Handle(rt.method+" "+rt.path, h)
	}
	ui := s.servePage(dashboard.Handler())
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /assets/", ui)
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	var h http.Handler = jsonMuxErrors(mux)
	h = s.checkHost(h)
	h = crossOrigin(h, s.cfg.CORSOrigins)
	h = cors(h, s.cfg.CORSOrigins)
	return s.observe(h)
}

// endpoint adapts a route's handler: a returned error becomes the JSON error
// response, and backend calls of ordinary routes are bounded in time.
func (s *Server) endpoint(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.stream {
			ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if sw, ok := w.(*statusWriter); ok {
			sw.route = rt.method + " " + rt.path
		}
		if err := rt.handle(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// jsonMuxErrors answers the mux's own 404 and 405 in JSON.
func jsonMuxErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&muxErrorWriter{ResponseWriter: w, r: r}, r)
	})
}

// muxErrorWriter replaces the mux's plain-text 404 and 405 bodies.
type muxErrorWriter struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool
}

func (m *muxErrorWriter) WriteHeader(code int) {
	switch code {
	case http.StatusNotFound:
		m.replaced = true
		writeErrorBody(m.ResponseWriter, code, codeNotFound, fmt.Sprintf("no endpoint %s %s", m.r.Method, m.r.URL.Path))
	case http.StatusMethodNotAllowed:
		m.replaced = true
		writeErrorBody(m.ResponseWriter, code, codeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s (allowed: %s)",
			m.r.Method, m.r.URL.Path, m.Header().Get("Allow")))
	default:
		m.ResponseWriter.WriteHeader(code)
	}
}

func (m *muxErrorWriter) Write(p []byte) (int, error) {
	if m.replaced {
		return len(p), nil
	}
	return m.ResponseWriter.Write(p)
}

// observe logs each request at debug and turns a panic into a 500 (or, when
// the response had begun, an aborted connection).
func (s *Server) observe(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("api: handler panicked", "method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeErrorBody(sw, http.StatusInternalServerError, codeInternal, "internal error")
					p = nil
				}
			}
			s.log.Debug("http request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"bytes", sw.bytes, "duration", time.Since(start), "remote", r.RemoteAddr)
			// A handler that wrote nothing sent 200, as net/http does.
			s.cfg.Metrics.HTTPRequest(cmp.Or(sw.route, "unmatched"), cmp.Or(sw.status, http.StatusOK))
			if p != nil {
				panic(http.ErrAbortHandler) // a half-written response must not look complete
			}
		}()
		h.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status and size of a response. It unwraps for
// http.ResponseController, so flushes and deadlines reach the connection.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until the status is written
	bytes  int64
	route  string // the route's pattern, once the mux matched one
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// FlushError flushes through to the connection (used by ResponseController).
func (w *statusWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() { w.FlushError() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// crossOrigin refuses state-changing requests from other origins' web
// pages, but those of trusted origins (Config.CORSOrigins).
func crossOrigin(h http.Handler, trusted []string) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range trusted {
		_ = cop.AddTrustedOrigin(o) // checked by Config.check
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeErrorBody(w, http.StatusForbidden, codeForbidden, "cross-origin request refused")
	}))
	return cop.Handler(h)
}

// cors answers the CORS protocol for the allowed origins: a preflight
// (OPTIONS with Access-Control-Request-Method) gets 204 and what may be
// sent; every answer to such an origin names it in
// Access-Control-Allow-Origin. Other origins get no CORS header, so
// browsers keep their pages from reading answers.
func cors(h http.Handler, allowed []string) http.Handler {
	if len(allowed) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !slices.Contains(allowed, origin) {
			h.ServeHTTP(w, r)
			return
		}
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", origin)
		hd.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hd.Set("Access-Control-Allow-Methods", "GET, POST")
			hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
			hd.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// pathID returns the wildcard name ({id}, {thread}) of the request's
// path, a kind of thing's id, checked by the one id rule (package ids): a
// malformed id names nothing that exists.
func pathID(r *http.Request, name, kind string) (string, error) {
	id := r.PathValue(name)
	if !ids.Valid(id) {
		return "", notFound("%s %q not found: not a valid id", kind, strings.ToValidUTF8(id, "?"))
	}
	return id, nil
}
