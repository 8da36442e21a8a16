package spec

import "errors"

// ErrInvalid marks every problem with a spec's content: syntax, unknown keys,
// wrong types and failed validation. Reading errors (a missing file) do not
// carry it.
var ErrInvalid = errors.New("invalid agent spec")

// FieldError is one problem at one place of a spec. Path names the field the
// way a user writes it, e.g. "agents[1].harness.permissions.rules[0].decision".
//
// It matches ErrInvalid and the cause (such as policy.ErrBadPolicy) under
// errors.Is.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap exposes both ErrInvalid and the cause.
func (e *FieldError) Unwrap() []error { return []error{ErrInvalid, e.Err} }
