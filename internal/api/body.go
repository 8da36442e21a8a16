package api

import (
	"bytes"
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
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		return bodyError(err)
	}
	if err := checkDepth(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("the body must hold one JSON object and nothing after it")
	}
	return nil
}

// maxDepth is the deepest nesting of objects and arrays a body may have:
// far more than any request needs, and checked before decoding, so a body
// of a million brackets costs a scan, not a decoder's stacks.
const maxDepth = 64

// checkDepth refuses JSON nested deeper than maxDepth, outside strings.
func checkDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return badRequest("the body nests objects and arrays deeper than %d", maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
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
