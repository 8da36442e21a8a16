package durable_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/store"
)

// sseEvent is one message of a run's event stream.
type sseEvent struct {
	id   uint64
	name string // its event: line
	data string
	e    event.Event
}

// sse reads GET /v1/runs/{run}/events, resuming after lastID when it is not
// 0, until the server ends the stream or, when stopAfter > 0, until
// stopAfter events have come (then it hangs up). It returns the events, the
// status, and whether the server ended the stream.
func (c *coord) sse(run string, lastID uint64, stopAfter int) ([]sseEvent, int, bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.api+"/v1/runs/"+run+"/events", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(lastID, 10))
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("GET events of %s: %v", run, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, true
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		c.t.Errorf("events of %s: Content-Type %q", run, ct)
	}
	var (
		out []sseEvent
		cur sseEvent
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data == "" {
				continue // the end of a comment
			}
			if err := json.Unmarshal([]byte(cur.data), &cur.e); err != nil {
				c.t.Fatalf("events of %s: event %d: %v: %s", run, cur.id, err, cur.data)
			}
			if cur.name != string(cur.e.Type) {
				c.t.Fatalf("events of %s: event %d named %q, want its type %q", run, cur.id, cur.name, cur.e.Type)
			}
			out = append(out, cur)
			cur = sseEvent{}
			if stopAfter > 0 && len(out) == stopAfter {
				return out, http.StatusOK, false // hang up mid-stream
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.id, err = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				c.t.Fatalf("events of %s: bad id line %q", run, line)
			}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		default:
			c.t.Fatalf("events of %s: unexpected line %q", run, line)
		}
	}
	if err := sc.Err(); err != nil {
		c.t.Fatalf("events of %s: %v", run, err)
	}
	if cur.data != "" {
		c.t.Errorf("events of %s: the stream ended in the middle of an event", run)
	}
	return out, http.StatusOK, true
}

// streamRunEvents reads every run.* event (queued, started, finished) kept in
// the events stream, in stream order, over the test's own NATS connection.
func (c *coord) streamRunEvents() []event.Event {
	c.t.Helper()
	var out []event.Event
	for _, e := range c.streamEvents("*") {
		if strings.HasPrefix(string(e.Type), "run.") {
			out = append(out, e)
		}
	}
	return out
}

// streamEvents reads every event kept in the events stream for run (a run
// id, or * for all), in stream order: each message a batch of one run's
// events, JSON lines.
func (c *coord) streamEvents(run string) []event.Event {
	c.t.Helper()
	nc := c.connect()
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, store.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{store.SubjectEventLog(run)},
	})
	if err != nil {
		c.t.Fatalf("events stream: %v", err)
	}
	var out []event.Event
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			c.t.Fatalf("events stream: %v", err)
		}
		n, pending := 0, uint64(1)
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				c.t.Fatalf("events stream: %v", err)
			}
			pending = meta.NumPending
			for line := range strings.Lines(string(m.Data())) {
				e, err := event.Unmarshal([]byte(line))
				if err != nil {
					c.t.Fatalf("events stream: message %d: %v", meta.Sequence.Stream, err)
				}
				out = append(out, e)
			}
		}
		if err := batch.Error(); err != nil {
			c.t.Fatalf("events stream: %v", err)
		}
		if n == 0 || pending == 0 {
			return out
		}
	}
}

// queue returns the run queue's AckWait and how many submissions it holds.
func (c *coord) queue() (time.Duration, uint64) {
	c.t.Helper()
	nc := c.connect()
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, store.QueueStream, store.QueueConsumer)
	if err != nil {
		c.t.Fatalf("queue consumer: %v", err)
	}
	st, err := js.Stream(ctx, store.QueueStream)
	if err != nil {
		c.t.Fatalf("queue stream: %v", err)
	}
	return cons.CachedInfo().Config.AckWait, st.CachedInfo().State.Msgs
}

// count is how many of events have type typ.
func count(events []sseEvent, typ event.Type) int {
	n := 0
	for _, e := range events {
		if e.e.Type == typ {
			n++
		}
	}
	return n
}
