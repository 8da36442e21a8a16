package actor

import (
	"context"
	"log/slog"
)

// Context is what Receive gets: the message and the means to answer it. It
// is valid only during that Receive call; the engine reuses it for the next
// message, so do not keep it.
type Context struct {
	a         *actor
	env       envelope
	responded bool
}

// Message is the message being handled.
func (c *Context) Message() any { return c.env.msg }

// Self is the actor's own PID.
func (c *Context) Self() PID { return c.a.pid }

// Engine is the engine hosting the actor, to spawn, send to or stop others.
func (c *Context) Engine() *Engine { return c.a.e }

// Sender is who sent the message, when known: set by Context.Send and
// Engine.SendWithSender, absent for Engine.Send and Engine.Request.
func (c *Context) Sender() (PID, bool) {
	if c.env.sender == nil {
		return PID{}, false
	}
	return *c.env.sender, true
}

// Respond answers the Engine.Request being handled. Only the first call
// counts; for a message that is not a request it does nothing.
func (c *Context) Respond(v any) {
	if c.env.req == nil || c.responded {
		return
	}
	c.responded = true
	c.env.req.answer(v, nil)
}

// IsRequest reports whether the message awaits a Respond.
func (c *Context) IsRequest() bool { return c.env.req != nil }

// Send sends msg to another actor with this actor as the sender.
func (c *Context) Send(to PID, msg any) error {
	return c.a.e.send(to, envelope{msg: msg, sender: &c.a.pid})
}

// Context is the actor's lifetime context: cancelled (cause ErrStopped) as
// soon as the actor is asked to stop, so long work started from Receive
// ends with it. It outlives single messages, unlike the Context itself.
func (c *Context) Context() context.Context { return c.a.context() }

// Logger is the engine's logger with the actor's PID attached.
func (c *Context) Logger() *slog.Logger { return c.a.e.log.With("actor", c.a.pid.String()) }
