package transport

import (
	"errors"

	"github.com/formica-run/formica/internal/wire"
)

// Transport errors. Implementations wrap them so callers can use errors.Is
// whatever moves the bytes. Those a peer may answer with are wire errors
// (their codes are in wire's one list); the others never cross the wire.
var (
	// ErrNoResponders: nobody listens on the subject. On a per-worker subject
	// it means the worker is gone, so the caller may place the work again at once.
	ErrNoResponders = errors.New("no responders")
	// ErrSilent: no message at all arrived within the idle window; the peer is
	// presumed lost.
	ErrSilent = errors.New("peer silent")
	// ErrClosed: the call, subscription or transport is closed. It is the
	// wire's code, so a peer's subscription stopping reads the same.
	ErrClosed = wire.ErrClosed
	// ErrOverloaded: the responder's queue was full; try elsewhere or later.
	ErrOverloaded = wire.ErrOverloaded
	// ErrInvalidMsg: a message the transport refuses to send, such as one with
	// a reserved header name.
	ErrInvalidMsg = errors.New("invalid message")
	// ErrInvalidConfig wraps rejected configuration and options.
	ErrInvalidConfig = errors.New("invalid config")
)
