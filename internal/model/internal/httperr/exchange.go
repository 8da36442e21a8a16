package httperr

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/formica-run/formica/internal/tracing"

	"github.com/formica-run/formica/internal/model"
)

// maxBody bounds how much of an error response is kept for its message.
const maxBody = 64 << 10

// Exchange records what the server answered to one attempt; Attempt makes a
// fresh one per attempt.
type Exchange struct {
	status  int
	header  http.Header
	at      time.Time // when the headers arrived
	body    []byte    // of an error response
	success io.Reader // the body of a 2xx response, as the SDK reads it
	readErr error     // reading a success body failed: the connection broke
	usage   model.Usage
	// kick, when set, tells the idle watchdog that bytes arrived.
	kick func()
}

// Middleware fills x from the response; it has the shape of both SDKs'
// option.Middleware, which they call synchronously per attempt. Every
// read of the body counts as a sign of life for the idle timeout.
func (x *Exchange) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	tracing.ChatServer(req.Context(), req.URL)
	tracing.InjectHTTP(req.Context(), req.Header)
	res, err := next(req)
	if res == nil {
		return res, err
	}
	x.status, x.header, x.at = res.StatusCode, res.Header, time.Now()
	x.alive()
	if res.Body == nil {
		return res, err
	}
	body := &watchedBody{ReadCloser: res.Body, x: x}
	if res.StatusCode >= 400 {
		x.body, _ = io.ReadAll(io.LimitReader(body, maxBody))
		_ = res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(x.body))
		return res, err
	}
	res.Body = body
	x.success = body
	return res, err
}

// PlainJSON returns the body of a 2xx answer whose Content-Type is
// application/json, and true: a server that answered a streamed request
// with one JSON object, as some local servers do. It reports false for
// anything else (an event stream, an error). The SDKs' stream decoders
// read lazily, so the body is whole until their first Next.
func (x *Exchange) PlainJSON() (io.Reader, bool) {
	if x.success == nil || x.status < 200 || x.status >= 300 {
		return nil, false
	}
	mt, _, err := mime.ParseMediaType(x.header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, false
	}
	return x.success, true
}

// ContentType is the answer's Content-Type, for messages.
func (x *Exchange) ContentType() string { return x.header.Get("Content-Type") }

// SetUsage records the tokens a successful answer reported, for the gate.
func (x *Exchange) SetUsage(u model.Usage) { x.usage = u }

// outcome is what the gate learns of the attempt; usage only counts when
// the attempt succeeded (a broken stream's figures are partial).
func (x *Exchange) outcome(ok bool) model.Outcome {
	o := model.Outcome{Status: x.status, Header: x.header, At: x.at}
	if ok {
		o.Usage = x.usage
	}
	return o
}

// retryAfter is the wait the server asked for, or zero.
func (x *Exchange) retryAfter() time.Duration {
	d, _ := model.RetryAfter(x.header)
	return d
}

func (x *Exchange) alive() {
	if x.kick != nil {
		x.kick()
	}
}

// watchedBody tells a connection that breaks mid-body (retryable) from a
// complete body that does not decode (not retryable), and feeds the idle
// watchdog.
type watchedBody struct {
	io.ReadCloser
	x *Exchange
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.x.alive()
	}
	if err != nil && err != io.EOF {
		b.x.readErr = err
	}
	return n, err
}

// DecodePlain decodes the answer of x into a T when it came as one JSON
// object (PlainJSON), and reports whether it did.
func DecodePlain[T any](x *Exchange) (*T, bool, error) {
	body, ok := x.PlainJSON()
	if !ok {
		return nil, false, nil
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, true, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, true, err
	}
	return &v, true, nil
}
