package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
)

// streamWriteTimeout is how long one event may take to reach a client; a
// client that stalls longer is dropped (it may reconnect and resume).
const streamWriteTimeout = 30 * time.Second

// streamRetryAfter is the Retry-After of a stream refused past
// Config.MaxStreams, in seconds.
const streamRetryAfter = "5"

// errStreamClosed answers a send that comes after Events returned.
var errStreamClosed = errors.New("api: event stream closed")

// runEvents serves GET /v1/runs/{id}/events as Server-Sent Events:
//
//	id: <event id>
//	event: <event type> (run.finished, ...: what EventSource listeners name)
//	data: <event JSON, one line>
//
// and a ": keepalive" comment whenever nothing was sent for
// Config.KeepAlive. It resumes after the Last-Event-ID header, or else after
// the "after" query parameter, or else from the start. The stream ends when
// the backend's Events returns: at once for a finished run, after its history.
//
// A finished run with nothing after the resume point answers 204 No Content,
// which tells a browser's EventSource to stop reconnecting. A running run's
// headers go out at once, so clients see the stream open before any event.
//
// Past Config.MaxStreams streams served at once, a new one is answered 503
// with Retry-After at once: a client is never left with a 200 and nothing
// after it.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id", "run")
	if err != nil {
		return err
	}
	after, err := resumePoint(r)
	if err != nil {
		return err
	}
	if s.open.Add(1) > int64(s.cfg.MaxStreams) {
		s.open.Add(-1)
		w.Header().Set("Retry-After", streamRetryAfter)
		return &apiError{http.StatusServiceUnavailable, codeUnavailable,
			fmt.Sprintf("this server already serves its most event streams at once (%d); try again later", s.cfg.MaxStreams)}
	}
	defer s.open.Add(-1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)()

	run, err := s.b.GetRun(ctx, id) // 404 before the stream opens
	if err != nil {
		return err
	}
	st := &sseStream{ctx: ctx, w: w, rc: http.NewResponseController(w)}
	s.cfg.Metrics.SSEClient(1)
	defer s.cfg.Metrics.SSEClient(-1)
	if !run.Status.Final() {
		st.open()
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(s.cfg.KeepAlive)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := st.keepAlive(s.cfg.KeepAlive); err != nil {
					cancel()
					return
				}
			}
		}
	})
	err = s.b.Events(ctx, id, after, st.send)
	close(done)
	wg.Wait()
	opened, clientGone := st.close()

	switch {
	case !opened && err == nil:
		w.WriteHeader(http.StatusNoContent)
	case !opened && r.Context().Err() == nil && s.streams.Err() != nil:
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, "the server is shutting down"}
	case !opened:
		return err
	case err != nil && ctx.Err() == nil && !clientGone:
		s.log.Warn("api: event stream broke off", "run", id, "err", err)
	}
	return nil
}

// resumePoint is the event id to resume after: Last-Event-ID (what a
// reconnecting EventSource sends) wins over ?after=.
func resumePoint(r *http.Request) (uint64, error) {
	name, v := "Last-Event-ID", strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		name, v = "after", r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest("%s must be an event id (a non-negative integer), not %q", name, v)
	}
	return n, nil
}

// sseStream writes events and comments, one at a time, each flushed.
type sseStream struct {
	ctx    context.Context
	w      http.ResponseWriter
	rc     *http.ResponseController
	mu     sync.Mutex
	opened bool
	closed bool
	last   time.Time // of the last write
	failed bool      // a write failed: the client is gone or stalled
	buf    []byte
}

// open sends the status and headers.
func (st *sseStream) open() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.openLocked()
	st.flushLocked()
}

func (st *sseStream) openLocked() {
	if st.opened {
		return
	}
	st.opened = true
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	st.w.WriteHeader(http.StatusOK)
}

// send is the Backend's callback: one event as one SSE message.
func (st *sseStream) send(seq uint64, e event.Event) error {
	data, err := event.Marshal(e) // the JSON NATS carries; one line
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.buf = append(st.buf[:0], "id: "...)
	st.buf = strconv.AppendUint(st.buf, seq, 10)
	st.buf = append(st.buf, "\nevent: "...)
	st.buf = append(st.buf, e.Type...)
	st.buf = append(st.buf, "\ndata: "...)
	st.buf = append(st.buf, data...)
	st.buf = append(st.buf, "\n\n"...)
	return st.writeLocked(st.buf)
}

// keepAlive sends a comment unless something was sent within period.
func (st *sseStream) keepAlive(period time.Duration) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.opened && time.Since(st.last) < period {
		return nil
	}
	return st.writeLocked([]byte(": keepalive\n\n"))
}

func (st *sseStream) writeLocked(p []byte) error {
	if st.closed {
		return errStreamClosed
	}
	if err := st.ctx.Err(); err != nil {
		return context.Cause(st.ctx)
	}
	st.openLocked()
	st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // where the writer supports deadlines
	_, err := st.w.Write(p)
	if err == nil {
		err = st.flushLocked()
	}
	if err != nil {
		st.failed = true
		return err
	}
	st.last = time.Now()
	return nil
}

func (st *sseStream) flushLocked() error {
	if err := st.rc.Flush(); err != nil {
		return err
	}
	st.rc.SetWriteDeadline(time.Time{}) // idle between events: no deadline
	return nil
}

// close stops all writes and reports whether the stream was opened and
// whether a write to the client failed.
func (st *sseStream) close() (opened, failed bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	return st.opened, st.failed
}
