package quotaserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// protocol is what differs between the two APIs on the wire.
type protocol interface {
	// path is the endpoint answered.
	path() string
	// plain is the JSON body of a non-streaming answer.
	plain(a *answer) []byte
	// frames are the server-sent events of a streaming answer.
	frames(a *answer) []frame
	// errorBody is the provider's error JSON for an HTTP status.
	errorBody(status int, msg string) []byte
	// limitHeaders sets the provider's rate-limit headers.
	limitHeaders(h http.Header, q quota)
	// requestIDHeader names the header carrying the request's id.
	requestIDHeader() string
}

// frame is one server-sent event, due at an offset from the answer's start.
type frame struct {
	at   time.Duration
	data []byte
}

// quota is the state of the limits as one answer reports it.
type quota struct {
	now           time.Time
	requests      *limitState // nil without a request limit
	tokens        *limitState // nil without a token limit
	retryAfter    time.Duration
	refusedTokens bool // the token bucket refused, not the request bucket
}

// limitState is one limit: limit is the per-minute quota (as providers
// report it, not the burst), remaining the whole tokens in its bucket.
type limitState struct {
	limit, remaining int64
	reset            time.Duration // until the bucket is full again
}

func protocolFor(f Format) protocol {
	if f == Anthropic {
		return anthropicProtocol{}
	}
	return openaiProtocol{}
}

// retryAfterSeconds is d as Retry-After: whole seconds rounded up, at
// least 1, since a client waiting less would be refused again.
func retryAfterSeconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(max(s, 1)), 10)
}

// ceilMillis rounds d up to the millisecond, the precision reset headers
// carry, so a client trusting them never comes back early.
func ceilMillis(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}

// mustJSON encodes values built here, which always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("quotaserver: " + err.Error())
	}
	return b
}
