package modeltest

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// testKey is the key every case configures. It looks like a real key so that
// pattern-based scrubbing is exercised as well as exact matching.
const testKey = "sk-conformance-TESTKEY-0123456789"

// server is a fake provider endpoint answering a script of replies in order.
type server struct {
	t    *testing.T
	h    Harness
	srv  *httptest.Server
	mu   sync.Mutex
	next []Reply
	got  []Received
	logs lockedBuffer
	// wrongPathOK answers requests to other paths 404, as a real server
	// does, instead of failing the test.
	wrongPathOK bool
}

// serve starts a fake server answering replies in order; a request beyond
// the script fails the test and gets a 500.
func serve(t *testing.T, h Harness, replies ...Reply) *server {
	t.Helper()
	s := &server{t: t, h: h, next: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != s.h.Path {
		if !s.wrongPathOK {
			s.t.Errorf("request %s %s, want POST %s", r.Method, r.URL.Path, s.h.Path)
		}
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("reading request body: %v", err)
		return
	}
	got, err := s.h.DecodeRequest(body)
	if err != nil {
		s.t.Errorf("decoding request body: %v\n%s", err, body)
	}
	got.APIKey = s.h.Credential(r.Header)
	got.Header = r.Header.Clone()
	if got.Params["stream"] != true {
		// A stream-only server, as some gateways are: the suite's answers
		// are all streamed.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(s.h.EncodeError(http.StatusBadRequest, "this server only streams: set stream to true"))
		return
	}

	s.mu.Lock()
	s.got = append(s.got, got)
	var reply Reply
	ok := len(s.next) > 0
	if ok {
		reply, s.next = s.next[0], s.next[1:]
	}
	n := len(s.got)
	s.mu.Unlock()
	if !ok {
		s.t.Errorf("unexpected request %d: the script has no reply left", n)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	s.answer(w, r, reply, got)
}

func (s *server) answer(w http.ResponseWriter, r *http.Request, reply Reply, req Received) {
	if !sleep(r.Context(), reply.Delay) {
		return
	}
	if reply.HangUp {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			s.t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
		return
	}
	status := cmp.Or(reply.Status, http.StatusOK)
	if status < 400 && reply.Body == "" && !reply.JSON {
		s.stream(w, r, status, reply, req)
		return
	}
	body := []byte(reply.Body)
	if reply.Body == "" {
		if status >= 400 {
			body = s.h.EncodeError(status, reply.ErrorMessage)
		} else {
			var err error
			if body, err = s.h.EncodeReply(reply); err != nil {
				s.t.Errorf("encoding reply: %v", err)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	for k, vs := range reply.Header {
		w.Header()[http.CanonicalHeaderKey(k)] = vs
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// stream sends reply as the provider's server-sent events, each flushed on
// its own, paced, cut or stalled as reply says.
func (s *server) stream(w http.ResponseWriter, r *http.Request, status int, reply Reply, req Received) {
	events, err := s.h.EncodeStream(reply, req)
	if err != nil {
		s.t.Errorf("encoding the stream: %v", err)
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	for k, vs := range reply.Header {
		w.Header()[http.CanonicalHeaderKey(k)] = vs
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	send := func(ev Event) bool {
		var b strings.Builder
		if ev.Name != "" {
			b.WriteString("event: " + ev.Name + "\n")
		}
		b.WriteString("data: " + ev.Data + "\n\n")
		if _, err := io.WriteString(w, b.String()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if rc.Flush() != nil { // the headers go out at once, as a real server's do
		return
	}
	cut := reply.Events > 0 && reply.Events < len(events)
	if cut {
		events = events[:reply.Events]
	}
	for i, ev := range events {
		if i > 0 && !sleep(r.Context(), reply.Pace) {
			return
		}
		if !send(ev) {
			return
		}
	}
	switch {
	case !cut:
	case reply.Stall:
		<-r.Context().Done()
	case reply.StreamError != "":
		send(s.h.EncodeStreamError(reply.StreamError))
	}
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// received returns the requests seen so far.
func (s *server) received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.got...)
}

// model builds the provider for this server with tiny backoffs; o's zero
// fields take the suite's defaults.
func (s *server) model(o Options) model.Model {
	s.t.Helper()
	o.APIKey = cmp.Or(o.APIKey, testKey)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, 10*time.Second)
	o.MaxRetries = cmp.Or(o.MaxRetries, 2)
	o.RetryDelay = cmp.Or(o.RetryDelay, time.Millisecond)
	o.MaxRetryDelay = cmp.Or(o.MaxRetryDelay, 4*time.Millisecond)
	o.Logger = slog.New(slog.NewTextHandler(&s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := s.h.New(s.srv.URL, o)
	if err != nil {
		s.t.Fatalf("New: %v", err)
	}
	// Whatever happened, the key must not be in the logs.
	s.t.Cleanup(func() {
		if logs := s.logs.String(); strings.Contains(logs, testKey) {
			s.t.Errorf("the API key reached the logs:\n%s", logs)
		}
	})
	return m
}

// lockedBuffer is a log sink safe for the goroutines of a concurrent case.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
