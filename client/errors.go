package client

import (
	"errors"
	"fmt"

	"github.com/formica-run/formica/internal/api"
)

// ErrConfig is returned by New for a base URL it cannot use.
var ErrConfig = errors.New("client: bad config")

// APIError is an answer of the API with an error status: 400 bad_request,
// 401 unauthorized, 404 not_found, 409 conflict, 503 unavailable, ...
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the server's stable error code ("not_found"); empty when the
	// answer was not the API's JSON (a proxy's error page).
	Code string
	// Message is the server's message for people.
	Message string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.StatusCode)
	}
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.StatusCode, e.Code)
}

// Unwrap is the kind of error the status says (api.ErrInvalid for a 400,
// api.ErrNotFound, api.ErrConflict, api.ErrUnavailable), so errors.Is
// reads an answer as it reads the server's own errors; nil for others.
func (e *APIError) Unwrap() error {
	return map[int]error{400: api.ErrInvalid, 404: api.ErrNotFound, 409: api.ErrConflict, 503: api.ErrUnavailable}[e.StatusCode]
}
