package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// decodeBody reads the request body, at most Config.MaxBody bytes, into dst:
// exactly one JSON object whose fields dst knows. Unknown fields, malformed
// JSON and trailing data are 400s; an oversized body is a 413.
//
// The Content-Type is not checked, so `curl -d` works as is; cross-origin
// browser writes are refused by crossOrigin instead.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	if r.ContentLength > s.cfg.MaxBody {
		return &http.MaxBytesError{Limit: s.cfg.MaxBody}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return badRequest("the body must hold one JSON object and nothing after it")
	}
	return nil
}

// bodyError explains a decoding failure.
func bodyError(err error) error {
	var (
		tooBig  *http.MaxBytesError
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("the body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the body ends in the middle of its JSON")
	case errors.As(err, &syntax):
		return badRequest("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return badRequest("the body must be a JSON object, not %s", typeErr.Value)
		}
		return badRequest("field %q must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	// Unknown fields have no error type of their own: `json: unknown field "x"`.
	return badRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names a Go kind the way a JSON user would.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "a boolean"
	case kind == "slice", kind == "array":
		return "an array"
	}
	return "an object"
}
