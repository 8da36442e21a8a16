package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Reconnects of an event stream: a stream that drops is opened again
// after the last event it delivered, at most maxReconnects times in a row
// without an event between them, waiting longer each time.
const (
	maxReconnects  = 5
	firstReconnect = 250 * time.Millisecond
	lastReconnect  = 5 * time.Second
	// maxEventLine bounds one line of the stream (an event's JSON).
	maxEventLine = 16 << 20
)

// errDropped is a stream that ended before its run did.
var errDropped = errors.New("the event stream ended before the run")

// Events calls fn with each event of a run after the event id after (0:
// from the start), in order, each once, until the run's execution has
// ended (its last run.finished; nil), ctx ends (ctx's cause), or fn
// returns an error (that error). A stream that drops is resumed after the
// last event fn saw, so fn sees no event twice and misses none; it gives
// up after a few attempts in a row that bring nothing.
func (c *Client) Events(ctx context.Context, runID string, after uint64, fn func(id uint64, e Event) error) error {
	failures := 0
	for {
		seen, err := c.stream(ctx, runID, &after, fn)
		var cb callbackError
		var ae *APIError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.As(err, &cb):
			return cb.err
		case errors.As(err, &ae) && ae.StatusCode != http.StatusServiceUnavailable:
			return err
		}
		if seen {
			failures = 0
		}
		failures++
		if failures > maxReconnects {
			return fmt.Errorf("events of run %s: gave up after %d attempts: %w", runID, failures, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(min(firstReconnect<<(failures-1), lastReconnect)):
		}
	}
}

// callbackError is an error of Events' fn: it ends the watch as it is.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// stream reads one connection's events after *after, advancing it. It
// returns nil once the run's execution has ended, and whether it
// delivered any event.
func (c *Client) stream(ctx context.Context, runID string, after *uint64, fn func(uint64, Event) error) (seen bool, err error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/events", nil)
	if err != nil {
		return false, callbackError{err} // not worth a retry
	}
	req.Header.Set("Accept", "text/event-stream")
	if *after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(*after, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent: // finished, nothing after *after
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, apiError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var id uint64
	var data []byte
	finished := false
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0: // the end of a message
			if data == nil {
				continue // a comment's, or a message without data
			}
			var e Event
			if err := json.Unmarshal(data, &e); err != nil {
				return seen, fmt.Errorf("event %d of run %s: %w", id, runID, err)
			}
			data = nil
			if id <= *after {
				continue
			}
			if err := fn(id, e); err != nil {
				return seen, callbackError{err}
			}
			*after, seen, finished = id, true, e.Type == RunFinished
		case line[0] == ':': // a keepalive comment
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "id":
				if id, err = strconv.ParseUint(string(value), 10, 64); err != nil {
					return seen, fmt.Errorf("event stream of run %s: bad id %q", runID, value)
				}
			case "data":
				data = append(data, value...)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return seen, err
	}
	// The server ends a stream after the run's last run.finished; a stream
	// that ends elsewhere was cut (a restart, a proxy) and is resumed.
	if !finished {
		return seen, errDropped
	}
	return seen, nil
}

// Wait follows a run until it has ended and returns its final record.
func (c *Client) Wait(ctx context.Context, runID string) (Run, error) {
	var after uint64
	finished := 0 // the run.finished events seen: one per execution
	for {
		r, err := c.GetRun(ctx, runID)
		if err != nil || r.Status.Final() {
			return r, err
		}
		if finished <= r.Resumes {
			// This execution has not ended yet.
			err = c.Events(ctx, runID, after, func(id uint64, e Event) error {
				after = id
				if e.Type == RunFinished {
					finished++
				}
				return nil
			})
			if err != nil {
				return Run{}, err
			}
			continue
		}
		// A run's record is final just after its run.finished is sent, and
		// the API has no signal for that: ask again shortly.
		select {
		case <-ctx.Done():
			return Run{}, context.Cause(ctx)
		case <-time.After(recordLag):
		}
	}
}

// recordLag is how long Wait waits to ask again for a record that trails
// its run's run.finished.
const recordLag = 50 * time.Millisecond
