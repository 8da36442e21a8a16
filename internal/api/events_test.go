package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
)

// sseMsg is one message of an event stream: an event or a comment.
type sseMsg struct {
	ID      string
	Event   string
	Data    string
	Comment string
}

// sseClient reads an event stream.
type sseClient struct {
	t      *testing.T
	resp   *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
}

// stream opens an event stream (any status); every read is bounded.
func (h *harness) stream(path string, header ...string) *sseClient {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	c := &sseClient{t: h.t, resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel}
	h.t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next reads one message; io.EOF at the end of the stream.
func (c *sseClient) next() (sseMsg, error) {
	var m sseMsg
	for {
		line, err := c.rd.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && m == (sseMsg{}) {
				return m, io.EOF
			}
			return m, fmt.Errorf("stream broke off in a message (%q): %w", line, err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return m, nil
		case strings.HasPrefix(line, ":"):
			m.Comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			m.ID = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			m.Event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			if m.Data != "" {
				return m, fmt.Errorf("a second data line: %q", line)
			}
			m.Data = line[len("data: "):]
		default:
			return m, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// event reads the next event, skipping keepalives, and returns its id.
func (c *sseClient) event() (string, event.Event) {
	c.t.Helper()
	for {
		m, err := c.next()
		if err != nil {
			c.t.Fatalf("reading an event: %v", err)
		}
		if m.Comment != "" {
			continue
		}
		var e event.Event
		if err := json.Unmarshal([]byte(m.Data), &e); err != nil {
			c.t.Fatalf("data %q: %v", m.Data, err)
		}
		if m.Event != string(e.Type) {
			c.t.Fatalf("event: %q, want its type %q (EventSource listeners go by it)", m.Event, e.Type)
		}
		return m.ID, e
	}
}

// end checks that the stream ends, skipping keepalives.
func (c *sseClient) end() {
	c.t.Helper()
	for {
		m, err := c.next()
		if err == io.EOF {
			return
		}
		if err != nil || m.Comment == "" {
			c.t.Fatalf("want the end of the stream, got %+v, %v", m, err)
		}
	}
}

// testEvents are n events of run id, with a multi-line output in each.
func testEvents(id string, from, n int) []event.Event {
	var out []event.Event
	for i := from; i < from+n; i++ {
		out = append(out, event.Event{Type: event.ToolResult, Time: time.Date(2025, 1, 1, 0, 0, i, 0, time.UTC),
			RunID: id, ThreadID: "t1", Depth: 1, Name: "helper", Tool: "bash", Output: fmt.Sprintf("line %d\nline two\r\n", i)})
	}
	return out
}

func TestEventsFinishedRun(t *testing.T) {
	h := newHarness(t, Config{})
	events := testEvents("r1", 1, 3)
	h.fake.addRun("r1", event.Succeeded, events...)
	c := h.stream("/v1/runs/r1/events")
	if c.resp.StatusCode != 200 {
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := c.resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	var ids []string
	var got []event.Event
	for range events {
		id, e := c.event()
		ids, got = append(ids, id), append(got, e)
	}
	c.end()
	if diff := cmp.Diff([]string{"1", "2", "3"}, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(events, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestEventsResume(t *testing.T) {
	h := newHarness(t, Config{})
	h.fake.addRun("r1", event.Running, testEvents("r1", 1, 3)...)

	// A client reads K=2 events, then goes away.
	c := h.stream("/v1/runs/r1/events")
	for _, want := range []string{"1", "2"} {
		if id, _ := c.event(); id != want {
			t.Fatalf("id %s, want %s", id, want)
		}
	}
	c.close()
	waitFor(t, "the server to let go of the stream", func() bool { return h.fake.activeStreams() == 0 })
	h.fake.emit("r1", testEvents("r1", 4, 2)...) // while nobody listens

	// It comes back with Last-Event-ID and gets exactly the rest, live ones
	// included, then the end.
	c = h.stream("/v1/runs/r1/events", "Last-Event-ID", "2")
	var ids []string
	var got []event.Event
	for range 3 {
		id, e := c.event()
		ids, got = append(ids, id), append(got, e)
	}
	h.fake.emit("r1", testEvents("r1", 6, 1)...)
	id, e := c.event()
	ids, got = append(ids, id), append(got, e)
	h.fake.finish("r1", event.Succeeded)
	c.end()
	if diff := cmp.Diff([]string{"3", "4", "5", "6"}, ids); diff != "" {
		t.Errorf("ids after resuming (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(testEvents("r1", 3, 4), got); diff != "" {
		t.Errorf("events after resuming (-want +got):\n%s", diff)
	}
}

func TestEventsResumePoint(t *testing.T) {
	h := newHarness(t, Config{})
	h.fake.addRun("r1", event.Failed, testEvents("r1", 1, 3)...)
	tests := []struct {
		name   string
		path   string
		header []string
		want   []string
	}{
		{"from the start", "/v1/runs/r1/events", nil, []string{"1", "2", "3"}},
		{"after query", "/v1/runs/r1/events?after=1", nil, []string{"2", "3"}},
		{"Last-Event-ID wins", "/v1/runs/r1/events?after=1", []string{"Last-Event-ID", "2"}, []string{"3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.stream(tt.path, tt.header...)
			var ids []string
			for range tt.want {
				id, _ := c.event()
				ids = append(ids, id)
			}
			c.end()
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
	// Nothing left of a finished run: 204 tells EventSource to stop.
	c := h.stream("/v1/runs/r1/events", "Last-Event-ID", "3")
	if c.resp.StatusCode != http.StatusNoContent {
		t.Errorf("nothing left: status %d, want 204", c.resp.StatusCode)
	}
}

func TestEventsKeepAlive(t *testing.T) {
	h := newHarness(t, Config{KeepAlive: 10 * time.Millisecond})
	h.fake.addRun("r1", event.Running)
	c := h.stream("/v1/runs/r1/events")
	if c.resp.StatusCode != 200 { // a running run's stream opens at once
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	for range 2 {
		m, err := c.next()
		if err != nil || m != (sseMsg{Comment: "keepalive"}) {
			t.Fatalf("got %+v, %v; want a keepalive comment", m, err)
		}
	}
	h.fake.emit("r1", testEvents("r1", 1, 1)...)
	if id, _ := c.event(); id != "1" {
		t.Errorf("id %s, want 1", id)
	}
	h.fake.finish("r1", event.Cancelled)
	c.end()
}

func TestEventsErrors(t *testing.T) {
	h := newHarness(t, Config{})
	h.fake.addRun("r1", event.Running)
	tests := []struct {
		name   string
		path   string
		header []string
		status int
		code   string
	}{
		{"unknown run", "/v1/runs/nope/events", nil, 404, "not_found"},
		{"malformed run id", "/v1/runs/a.%3E/events", nil, 404, "not_found"},
		{"bad Last-Event-ID", "/v1/runs/r1/events", []string{"Last-Event-ID", "abc"}, 400, "bad_request"},
		{"negative after", "/v1/runs/r1/events?after=-1", nil, 400, "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.stream(tt.path, tt.header...)
			body, _ := io.ReadAll(c.rd)
			status, code, _ := errorOf(t, reply{status: c.resp.StatusCode, header: c.resp.Header, body: body})
			if status != tt.status || code != tt.code {
				t.Errorf("got %d %s, want %d %s", status, code, tt.status, tt.code)
			}
		})
	}
}

// TestEventsOutliveServerTimeouts: the server's read and write timeouts,
// meant for ordinary requests, do not cut a stream short.
func TestEventsOutliveServerTimeouts(t *testing.T) {
	fake := newFake()
	s, err := New(Config{Addr: "127.0.0.1:0", KeepAlive: 10 * time.Millisecond}, fake)
	if err != nil {
		t.Fatal(err)
	}
	s.srv.ReadTimeout, s.srv.WriteTimeout = 50*time.Millisecond, 50*time.Millisecond
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	fake.addRun("r1", event.Running)
	h := &harness{t: t, s: s, fake: fake, url: "http://" + s.Addr()}
	c := h.stream("/v1/runs/r1/events")
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if m, err := c.next(); err != nil || m.Comment != "keepalive" {
			t.Fatalf("got %+v, %v; want keepalives", m, err)
		}
	}
	fake.emit("r1", testEvents("r1", 1, 1)...)
	if id, _ := c.event(); id != "1" {
		t.Errorf("id %s, want 1", id)
	}
	fake.finish("r1", event.Succeeded)
	c.end()
}

func TestShutdownEndsStreams(t *testing.T) {
	fake := newFake()
	s, err := New(Config{Addr: "127.0.0.1:0"}, fake)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	fake.addRun("r1", event.Running, testEvents("r1", 1, 1)...)
	h := &harness{t: t, s: s, fake: fake, url: "http://" + s.Addr()}
	c := h.stream("/v1/runs/r1/events")
	if id, _ := c.event(); id != "1" {
		t.Fatalf("id %s, want 1", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	c.end()
	if n := fake.activeStreams(); n != 0 {
		t.Errorf("%d streams still running", n)
	}
}

// Past MaxStreams streams at once, a new one is refused at once with 503
// and Retry-After, never opened; once one ends, the next is served.
func TestEventsPastMaxStreams(t *testing.T) {
	h := newHarness(t, Config{MaxStreams: 2})
	h.fake.addRun("r1", event.Running, testEvents("r1", 1, 1)...)
	var open []*sseClient
	for range 2 {
		c := h.stream("/v1/runs/r1/events")
		if id, _ := c.event(); id != "1" {
			t.Fatalf("id %s, want 1", id)
		}
		open = append(open, c)
	}
	c := h.stream("/v1/runs/r1/events")
	body, _ := io.ReadAll(c.rd)
	status, code, msg := errorOf(t, reply{status: c.resp.StatusCode, header: c.resp.Header, body: body})
	if status != http.StatusServiceUnavailable || code != "unavailable" {
		t.Fatalf("the third stream: %d %s, want 503 unavailable", status, code)
	}
	if ra := c.resp.Header.Get("Retry-After"); ra != "5" {
		t.Errorf("Retry-After %q, want 5", ra)
	}
	if !strings.Contains(msg, "most event streams at once (2)") {
		t.Errorf("message %q does not name the ceiling", msg)
	}
	if n := h.fake.activeStreams(); n != 2 {
		t.Errorf("%d streams reached the backend, want 2", n)
	}
	// Other requests are not affected.
	if r := h.do("GET", "/v1/runs/r1", nil); r.status != 200 {
		t.Errorf("GET a run while at the most streams: %d", r.status)
	}
	open[0].close()
	waitFor(t, "the server to let go of a stream", func() bool { return h.s.open.Load() == 1 })
	c = h.stream("/v1/runs/r1/events")
	if id, _ := c.event(); id != "1" {
		t.Fatalf("after one ended: id %s, want 1", id)
	}
	h.fake.finish("r1", event.Succeeded)
	c.end()
	open[1].end()
}
