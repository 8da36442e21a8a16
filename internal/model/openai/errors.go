package openai

import "errors"

// ErrConfig reports a Config that New rejects.
var ErrConfig = errors.New("invalid openai config")
