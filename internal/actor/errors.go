package actor

import "errors"

// Transport errors. Implementations wrap them so callers can use errors.Is
// whatever moves the bytes.
var (
	// ErrNoResponders: nobody listens on the subject. On a per-worker subject
	// it means the worker is gone, so the caller may place the work again at once.
	ErrNoResponders = errors.New("no responders")
	// ErrSilent: no message at all arrived within the idle window; the peer is
	// presumed lost.
	ErrSilent = errors.New("peer silent")
	// ErrClosed: the call, subscription, transport or engine is closed.
	ErrClosed = errors.New("closed")
	// ErrOverloaded: the responder's queue was full; try elsewhere or later.
	ErrOverloaded = errors.New("overloaded")
	// ErrInvalidMsg: a message the transport refuses to send, such as one with
	// a reserved header name.
	ErrInvalidMsg = errors.New("invalid message")
	// ErrInvalidConfig wraps rejected configuration and options.
	ErrInvalidConfig = errors.New("invalid config")
)

// Actor errors.
var (
	// ErrExists: an actor with that id already lives on the engine.
	ErrExists = errors.New("actor exists")
	// ErrNoActor: no such actor, or it is stopping.
	ErrNoActor = errors.New("no such actor")
	// ErrMailboxFull: the actor's bounded mailbox is full; Send never blocks.
	ErrMailboxFull = errors.New("mailbox full")
	// ErrNotLocal: the PID belongs to another engine's address.
	ErrNotLocal = errors.New("actor not local")
	// ErrNoResponse: the actor handled a Request without calling Respond.
	ErrNoResponse = errors.New("actor did not respond")
	// ErrPanic: the actor panicked while handling the message.
	ErrPanic = errors.New("actor panicked")
	// ErrStopped is the cancellation cause of an actor's context once it is
	// asked to stop.
	ErrStopped = errors.New("actor stopped")
)
