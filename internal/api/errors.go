package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Errors a Backend wraps so the API answers with the matching status.
var (
	// ErrNotFound: no such run or approval (404 not_found).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request clashes with the state, such as cancelling a
	// finished run or answering an approval twice (409 conflict).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request is malformed (400 bad_request).
	ErrInvalid = errors.New("invalid request")
	// ErrUnavailable: the backend cannot serve now, for example NATS is down
	// (503 unavailable).
	ErrUnavailable = errors.New("unavailable")
)

// Wrap marks err as one of the kinds above (ErrNotFound, ErrConflict,
// ErrInvalid, ErrUnavailable) without adding the kind's words to its text:
// errors.Is matches both, and the message stays err's own.
func Wrap(kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err}
}

// Errorf is Wrap(kind, fmt.Errorf(format, a...)).
func Errorf(kind error, format string, a ...any) error {
	return Wrap(kind, fmt.Errorf(format, a...))
}

type kindError struct{ kind, err error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// Errors of New and of the server's lifecycle.
var (
	// ErrInsecure: an address beyond loopback without a token.
	ErrInsecure = errors.New("api: refusing to serve beyond loopback without a token")
	// ErrConfig: any other unusable Config.
	ErrConfig = errors.New("api: bad config")
	// ErrServerClosed: Start after Start or after Shutdown.
	ErrServerClosed = errors.New("api: server already started or shut down")
)

// Error codes of the JSON error body.
const (
	codeBadRequest       = "bad_request"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "conflict"
	codeTooLarge         = "too_large"
	codeInternal         = "internal"
	codeUnavailable      = "unavailable"
)

// errorCodes lists every code, for the OpenAPI document.
var errorCodes = []string{codeBadRequest, codeUnauthorized, codeForbidden, codeNotFound,
	codeMethodNotAllowed, codeConflict, codeTooLarge, codeInternal, codeUnavailable}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable code and a human message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// apiError is an error with its HTTP status and code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, codeBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{http.StatusNotFound, codeNotFound, fmt.Sprintf(format, args...)}
}

// classify maps an error to what the client sees. internal reports a fault
// of ours or the backend's, whose text stays in the log.
func classify(err error) (e *apiError, internal bool) {
	var ae *apiError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae, false
	case errors.As(err, &tooBig):
		return &apiError{http.StatusRequestEntityTooLarge, codeTooLarge,
			fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)}, false
	case errors.Is(err, ErrNotFound):
		return &apiError{http.StatusNotFound, codeNotFound, err.Error()}, false
	case errors.Is(err, ErrConflict):
		return &apiError{http.StatusConflict, codeConflict, err.Error()}, false
	case errors.Is(err, ErrInvalid):
		return &apiError{http.StatusBadRequest, codeBadRequest, err.Error()}, false
	case errors.Is(err, ErrUnavailable):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, err.Error()}, false
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, "the backend did not answer in time"}, false
	}
	return &apiError{http.StatusInternalServerError, codeInternal, "internal error"}, true
}

// writeError answers with err as a JSON error body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e, internal := classify(err)
	if internal {
		if r.Context().Err() != nil {
			// The client is gone; nobody reads the answer.
			s.log.Debug("request abandoned", "method", r.Method, "path", r.URL.Path, "err", err)
		} else {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
	writeErrorBody(w, e.status, e.code, e.msg)
}

func writeErrorBody(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

// answer answers with v as JSON, or returns err, the failure that left
// nothing to answer.
func answer(w http.ResponseWriter, status int, v any, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, v)
	return nil
}

// answerList answers 200 with list as JSON, [] when empty, or returns err.
func answerList[T any](w http.ResponseWriter, list []T, err error) error {
	if list == nil {
		list = []T{}
	}
	return answer(w, http.StatusOK, list, err)
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // only a value holding something JSON cannot carry
		status = http.StatusInternalServerError
		body, _ = json.Marshal(ErrorBody{Error: ErrorDetail{Code: codeInternal, Message: "internal error"}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
