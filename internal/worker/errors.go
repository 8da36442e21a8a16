package worker

import "errors"

// ErrBadConfig wraps rejected worker settings.
var ErrBadConfig = errors.New("bad worker config")
