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
	if msg == "" {
		return fmt.Errorf("%s: HTTP %d: %w", provider, status, kind)
	}
	return fmt.Errorf("%s: HTTP %d: %w: %s", provider, status, kind, msg)
}

// Retryable reports whether err is worth another attempt (rate limit or server error).
func Retryable(err error) bool {
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrServer)
}
