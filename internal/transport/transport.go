package transport

import (
	"context"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// Transport moves messages between processes.
type Transport interface {
	// Publish sends one message, fire and forget.
	Publish(ctx context.Context, subject string, m wire.Msg) error
	// RequestFunc sends m to subject with a reply inbox of the caller's
	// own, so the responder may answer with any number of messages
	// (progress, then a final one). It returns at once; each reply goes to
	// f, one at a time and in arrival order (a body fetched by reference is handed
	// over once fetched), on a goroutine of the transport that must not
	// block. The call's end comes to f as its last word: an error wrapping
	// ErrNoResponders when nobody listens, or ErrClosed when the transport
	// closes; a reply whose body could not be fetched comes as an error too.
	// stop ends the request; f may still be running when stop returns, but
	// is not called again after that.
	RequestFunc(ctx context.Context, subject string, m wire.Msg, f func(wire.Msg, error)) (stop func(), err error)
	// Serve calls h for every message on subject (queue: optional queue
	// group), never on the connection's read loop: handlers run on their own
	// goroutines, at most maxConcurrent at once (0 = a goroutine per
	// message). Messages beyond that wait in a bounded queue; when it is full
	// they are answered with wire.ErrorMsg(wire.CodeOverloaded, ...) if they have a
	// reply subject, and logged if not, never silently dropped.
	// Call Flush before announcing the subject to peers.
	Serve(subject, queue string, maxConcurrent int, h Handler) (Subscription, error)
	// Flush returns once the server has processed everything sent so far,
	// subscriptions included.
	Flush(ctx context.Context) error
}

// Handler handles one served message. ctx is cancelled when the
// Subscription stops.
type Handler func(ctx context.Context, m wire.Msg, r Replier)

// Replier answers one request. Reply may be called many times (progress
// heartbeats, then the final reply), also from other goroutines and after the
// handler returned.
type Replier interface {
	// Reply sends m to the requester. For a message without reply subject
	// it does nothing and returns nil.
	Reply(m wire.Msg) error
	// NoReply reports a message without reply subject (a Publish).
	NoReply() bool
}

// Call is one outstanding request (Request). One goroutine reads it.
type Call interface {
	// Next returns the next reply. It fails with an error wrapping ErrSilent
	// when no message at all arrives for idle (the peer is presumed lost;
	// idle <= 0 waits for ctx alone), ErrNoResponders when the server says
	// nobody listens, ErrClosed after Close, or ctx's error.
	Next(ctx context.Context, idle time.Duration) (wire.Msg, error)
	// Close stops receiving; safe to call twice and from any goroutine.
	Close()
}

// Subscription is a Serve registration.
type Subscription interface {
	// Stop stops receiving, cancels the handlers' context, answers messages
	// that were still waiting with wire.ErrorMsg(wire.CodeClosed, ...), and waits for
	// running handlers up to a bound set by the implementation. Safe to call
	// twice.
	Stop() error
}
