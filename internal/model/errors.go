package model

import (
	"errors"
	"fmt"
)

// Sentinel errors providers wrap so callers can tell failures apart with errors.Is.
var (
	ErrBadRef          = errors.New("bad model reference")
	ErrUnknownProvider = errors.New("unknown model provider")
	ErrUnauthorized    = errors.New("model provider rejected the credentials")
	ErrRateLimited     = errors.New("model provider rate limit")
	ErrServer          = errors.New("model provider server error")
	ErrBadResponse     = errors.New("malformed model response")
	ErrBadRequest      = errors.New("model provider rejected the request")
	// ErrTruncated: the answer hit the output token limit before anything
	// usable (text or a tool call) was produced.
	ErrTruncated = errors.New("model output truncated at max_tokens")
)

// StatusError classifies an HTTP status from a provider into one of the
// sentinels above, keeping the provider's message.
func StatusError(provider string, status int, msg string) error {
	var kind error
	switch {
	case status == 401 || status == 403:
		kind = ErrUnauthorized
	case status == 429:
		kind = ErrRateLimited
	case status >= 500:
		kind = ErrServer
	default:
		kind = ErrBadRequest
	}
	return &HTTPError{Provider: provider, Status: status, kind: kind, msg: msg}
}

// HTTPError is a provider's HTTP failure: its status, classified by the
// sentinel it unwraps to.
type HTTPError struct {
	Provider string
	Status   int
	kind     error
	msg      string
}

func (e *HTTPError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("%s: HTTP %d: %v", e.Provider, e.Status, e.kind)
	}
	return fmt.Sprintf("%s: HTTP %d: %v: %s", e.Provider, e.Status, e.kind, e.msg)
}

func (e *HTTPError) Unwrap() error { return e.kind }

// StatusOf is the HTTP status err carries, or 0.
func StatusOf(err error) int {
	var h *HTTPError
	if errors.As(err, &h) {
		return h.Status
	}
	return 0
}

// Retryable reports whether err is worth another attempt (rate limit or server error).
func Retryable(err error) bool {
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrServer)
}
