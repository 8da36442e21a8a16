package quotaserver

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxBody bounds a request body; a longer one is refused with 400.
const maxBody = 64 << 20

// Server is a running provider. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	proto   protocol
	ln      net.Listener
	hs      *http.Server
	closing chan struct{} // closed by Close: stalled and waiting answers end
	once    sync.Once

	mu       sync.Mutex
	requests *bucket // nil without a request limit
	tokens   *bucket // nil without a token limit
	stats    Stats
	ids      int
}

// Start validates cfg and serves it on a new port of 127.0.0.1 until Close.
func Start(cfg Config) (*Server, error) {
	cfg, err := cfg.check()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("quotaserver: %w", err)
	}
	s := &Server{cfg: cfg, proto: protocols[cfg.Format], ln: ln, closing: make(chan struct{})}
	s.refill(time.Now())
	// Clients hanging up mid-answer is what some tests are about: not news.
	s.hs = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go s.hs.Serve(ln)
	return s, nil
}

// URL is the server's root, such as "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// BaseURL is the base URL a client of the server's format is configured
// with: URL()+"/v1" for OpenAI, whose clients append "/chat/completions";
// URL() for Anthropic, whose clients append "/v1/messages".
func (s *Server) BaseURL() string { return s.URL() + s.proto.base }

// Close stops the server: it ends answers in progress (stalled ones too),
// waits a little for them to return, and closes every connection.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.hs.Shutdown(ctx) != nil {
			s.hs.Close()
		}
	})
}

// Stats returns the counts since Start or the last Reset.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Reset zeroes the counts and refills the buckets, so each round of a
// benchmark starts from the same state. Requests in flight stay counted
// in InFlight.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = Stats{InFlight: s.stats.InFlight, MaxInFlight: s.stats.InFlight}
	s.refill(time.Now())
}

// refill makes full buckets; s.mu is held or s is not shared yet.
func (s *Server) refill(now time.Time) {
	s.requests, s.tokens = nil, nil
	if s.cfg.RequestsPerMinute > 0 {
		s.requests = newBucket(int64(s.cfg.Burst), int64(s.cfg.RequestsPerMinute), now)
	}
	if s.cfg.TokensPerMinute > 0 {
		s.tokens = newBucket(int64(s.cfg.TokensPerMinute), int64(s.cfg.TokensPerMinute), now)
	}
}

// verdict is what admit decided for one request.
type verdict int

const (
	accepted verdict = iota
	refusedRate
	refusedInFlight
)

// arrive counts a request and returns its id.
func (s *Server) arrive(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	if s.stats.First.IsZero() {
		s.stats.First = now
	}
	s.stats.Last = now
	s.ids++
	return strconv.Itoa(s.ids)
}

// reject counts a bad request and answers it with status.
func (s *Server) reject(w http.ResponseWriter, status int, msg string) {
	s.mu.Lock()
	s.stats.BadRequests++
	s.mu.Unlock()
	s.fail(w, status, msg)
}

// admit decides whether a request of n input tokens is answered, charging
// the buckets only when it is, and reports the quota as it then stands.
func (s *Server) admit(now time.Time, n int64) (verdict, quota) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := accepted
	q := quota{now: now}
	switch {
	case s.cfg.MaxInFlight > 0 && s.stats.InFlight >= s.cfg.MaxInFlight:
		v = refusedInFlight
		s.stats.RefusedInFlight++
	case s.requests != nil && !s.requests.allows(now, 1):
		v = refusedRate
		s.stats.RefusedRate++
	case s.tokens != nil && !s.tokens.allows(now, n):
		v = refusedRate
		q.refusedTokens = true
		s.stats.RefusedRate++
	}
	if v == accepted {
		if s.requests != nil {
			s.requests.take(now, 1)
		}
		if s.tokens != nil {
			s.tokens.take(now, n)
		}
		s.stats.Accepted++
		s.stats.InFlight++
		s.stats.MaxInFlight = max(s.stats.MaxInFlight, s.stats.InFlight)
	} else {
		s.stats.Refused++
	}
	if s.requests != nil {
		q.requests = &limitState{int64(s.cfg.RequestsPerMinute), s.requests.remaining(now), s.requests.untilFull(now)}
		if v == refusedRate {
			q.retryAfter = s.requests.wait(now, 1)
		}
	}
	if s.tokens != nil {
		q.tokens = &limitState{int64(s.cfg.TokensPerMinute), s.tokens.remaining(now), s.tokens.untilFull(now)}
		if v == refusedRate {
			q.retryAfter = max(q.retryAfter, s.tokens.wait(now, n))
		}
	}
	return v, q
}

func (s *Server) leave() {
	s.mu.Lock()
	s.stats.InFlight--
	s.mu.Unlock()
}

// ServeHTTP answers one request: a bad one or one over the quota at once,
// an accepted one over Latency (+ StreamFor). It makes Server usable as a
// handler elsewhere too, though Start is the way to serve it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := s.arrive(time.Now())
	h := w.Header()
	h.Set(s.proto.requestID, "req_"+id)
	if r.Method != http.MethodPost || r.URL.Path != s.proto.path {
		s.reject(w, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s): this server answers POST %s",
			r.Method, r.URL.Path, s.proto.path))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.reject(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	req, err := decode(s.cfg.Format, body)
	if err != nil {
		s.reject(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.cfg.StreamOnly && !req.Stream {
		s.reject(w, http.StatusBadRequest, `this server answers only streaming requests ("stream": true)`)
		return
	}
	start := time.Now()
	v, q := s.admit(start, int64(req.InputTokens))
	if s.cfg.Signals == SignalHeaders {
		s.proto.limitHeaders(h, q)
	}
	if v != accepted {
		s.refuse(w, v, q)
		return
	}
	defer s.leave()
	a := layout(s.cfg, req, s.cfg.Respond(req), s.proto.idPrefix+id, start)
	if req.Stream {
		s.stream(w, r.Context(), start, a)
	} else {
		s.answer(w, r.Context(), start, a)
	}
}

// refuse answers 429 with the signals the config chose.
func (s *Server) refuse(w http.ResponseWriter, v verdict, q quota) {
	wait := q.retryAfter
	var msg string
	switch {
	case v == refusedInFlight:
		// When a slot frees is unknown; the shortest wait is the honest hint.
		wait = time.Second
		msg = fmt.Sprintf("Rate limit reached: at most %d requests in flight. Please try again later.", s.cfg.MaxInFlight)
	case q.refusedTokens:
		msg = fmt.Sprintf("Rate limit reached for input tokens per min (TPM): Limit %d. Please try again in %v.",
			s.cfg.TokensPerMinute, ceilMillis(wait))
	default:
		msg = fmt.Sprintf("Rate limit reached for requests per min (RPM): Limit %d. Please try again in %v.",
			s.cfg.RequestsPerMinute, ceilMillis(wait))
	}
	if s.cfg.Signals != SignalBare {
		w.Header().Set("Retry-After", retryAfterSeconds(wait))
	}
	s.fail(w, http.StatusTooManyRequests, msg)
}

// fail writes an error answer in the provider's shape.
func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(s.proto.errorBody(status, msg))
}

// answer writes a JSON answer once it is due, or stalls after the headers.
func (s *Server) answer(w http.ResponseWriter, ctx context.Context, start time.Time, a *answer) {
	w.Header().Set("Content-Type", "application/json")
	if s.cfg.StallAfter > 0 {
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		s.stall(ctx)
		return
	}
	if !s.sleepUntil(ctx, start.Add(a.end)) {
		return
	}
	w.Write(s.proto.plain(a))
}

// stream writes the answer's events, each when it is due.
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, start time.Time, a *answer) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, f := range s.proto.frames(a) {
		if s.cfg.StallAfter > 0 && i == s.cfg.StallAfter {
			s.stall(ctx)
			return
		}
		if !s.sleepUntil(ctx, start.Add(f.at)) {
			return
		}
		if _, err := w.Write(f.data); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// stall sends nothing until the client goes away or the server closes.
func (s *Server) stall(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.closing:
	}
}

// sleepUntil waits for t; false if the client went away or the server is
// closing first.
func (s *Server) sleepUntil(ctx context.Context, t time.Time) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		case <-s.closing:
		}
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	default:
		return true
	}
}
