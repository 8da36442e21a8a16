package scripted

import "errors"

// Sentinel errors of the package; always wrapped with detail.
var (
	// ErrBadScript marks a script file that does not parse or validate.
	ErrBadScript = errors.New("bad scripted model file")
	// ErrExhausted marks a request past the last response the script holds
	// for that conversation: the test asked for more turns than it recorded.
	ErrExhausted = errors.New("scripted model has no response left")
)

// Error is what Generate returns for a response with an `error` field; its
// message is exactly that text.
type Error struct{ Text string }

func (e *Error) Error() string { return e.Text }
