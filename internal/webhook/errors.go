package webhook

import "errors"

// Sentinel errors; every error of the package wraps one.
var (
	// ErrSecret marks a signing secret that is not whsec_ and a key of 24
	// to 64 bytes in standard base64.
	ErrSecret = errors.New("webhook: bad secret")
	// ErrURL marks a webhook URL that is not absolute http or https, or
	// that a submitter may not name.
	ErrURL = errors.New("webhook: bad URL")
	// ErrInvalidConfig marks a Deliverer's bad configuration.
	ErrInvalidConfig = errors.New("webhook: invalid config")
	// ErrEventType marks an event type no webhook is sent for.
	ErrEventType = errors.New("webhook: unknown event type")
)
