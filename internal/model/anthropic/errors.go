package anthropic

import "errors"

// ErrConfig reports a Config that New rejects.
var ErrConfig = errors.New("invalid anthropic config")
