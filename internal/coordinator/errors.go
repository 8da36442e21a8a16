package coordinator

import "errors"

// ErrBadConfig wraps rejected coordinator settings.
var ErrBadConfig = errors.New("bad coordinator config")
