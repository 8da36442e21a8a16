package policy

import "errors"

// ErrBadPolicy wraps every malformed permission or visibility policy.
var ErrBadPolicy = errors.New("bad policy")
