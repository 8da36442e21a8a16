package coordinator

import "errors"

// ErrBadConfig wraps rejected coordinator settings.
var ErrBadConfig = errors.New("bad coordinator config")

// ErrDeadline ends a run past its deadline; the run fails with its text.
var ErrDeadline = errors.New("deadline exceeded")
