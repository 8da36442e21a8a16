package anthropic

import "errors"

// ErrConfig reports a Config (or environment) that New or FromEnv rejects.
var ErrConfig = errors.New("invalid anthropic config")
