package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ContentType is how events travel on NATS, in the events stream and in
// the HTTP API's SSE data lines: one JSON object each, so any tool
// (`nats sub`, jq, a log shipper) reads them without Formica's code.
const ContentType = "application/json"

// ErrBadEvent marks bytes that are not an event.
var ErrBadEvent = errors.New("event: not an event")

// Marshal encodes e as one line of JSON (strings escape newlines). It is
// the one encoding of events: publishers on NATS and the SSE stream both
// call it, so a consumer sees the same object wherever it reads.
func Marshal(e Event) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("event: encode %s: %w", e.Type, err)
	}
	return b, nil
}

// Unmarshal decodes what Marshal wrote. Unknown fields are ignored, so an
// older reader keeps working when events gain fields; an object without a
// type is refused.
func Unmarshal(data []byte) (Event, error) {
	var e Event
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return Event{}, fmt.Errorf("%w: want a JSON object", ErrBadEvent)
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if e.Type == "" {
		return Event{}, fmt.Errorf("%w: no type", ErrBadEvent)
	}
	return e, nil
}
