package quotaserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// protocol is what differs between the two APIs on the wire.
type protocol struct {
	// path is the endpoint answered; base is what a client's base URL adds
	// to the server's root.
	path, base string
	// requestID names the header carrying the request's id; idPrefix
	// starts an answer's id.
	requestID, idPrefix string
	// decode reads a request body.
	decode func(body []byte, req *Request) error
	// plain is the JSON body of a non-streaming answer.
	plain func(a *answer) []byte
	// frames are the server-sent events of a streaming answer.
	frames func(a *answer) []frame
	// errorBody is the provider's error JSON for an HTTP status.
	errorBody func(status int, msg string) []byte
	// limitHeaders sets the provider's rate-limit headers.
	limitHeaders func(h http.Header, q quota)
}

var protocols = map[Format]protocol{
	OpenAI: {path: "/v1/chat/completions", base: "/v1", requestID: "x-request-id", idPrefix: "chatcmpl-",
		decode: decodeOpenAI, plain: openaiPlain, frames: openaiFrames, errorBody: openaiErrorBody, limitHeaders: openaiLimitHeaders},
	Anthropic: {path: "/v1/messages", requestID: "request-id", idPrefix: "msg_",
		decode: decodeAnthropic, plain: anthropicPlain, frames: anthropicFrames, errorBody: anthropicErrorBody, limitHeaders: anthropicLimitHeaders},
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
