package httperr

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// maxBody bounds how much of an error response is kept for its message.
const maxBody = 64 << 10

// Exchange records what the server answered to one attempt; Attempt makes a
// fresh one per attempt.
type Exchange struct {
	status  int
	header  http.Header
	body    []byte // of an error response
	readErr error  // reading a success body failed: the connection broke
}

// Middleware fills x from the response; it has the shape of both SDKs'
// option.Middleware, which they call synchronously per attempt.
func (x *Exchange) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if res == nil {
		return res, err
	}
	x.status, x.header = res.StatusCode, res.Header
	switch {
	case res.Body == nil:
	case res.StatusCode >= 400:
		x.body, _ = io.ReadAll(io.LimitReader(res.Body, maxBody))
		_ = res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(x.body))
	default:
		res.Body = &watchedBody{ReadCloser: res.Body, x: x}
	}
	return res, err
}

// retryAfter is the wait the server asked for, or zero.
func (x *Exchange) retryAfter() time.Duration {
	if x.header == nil {
		return 0
	}
	d, _ := model.RetryAfter(x.header)
	return d
}

// watchedBody tells a connection that breaks mid-body (retryable) from a
// complete body that does not decode (not retryable).
type watchedBody struct {
	io.ReadCloser
	x *Exchange
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.x.readErr = err
	}
	return n, err
}
