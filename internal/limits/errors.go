package limits

import "errors"

// ErrBadConfig wraps rejected limit settings.
var ErrBadConfig = errors.New("bad limits config")
