package natstransport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// RequestFunc publishes m to subject with a reply subject under this
// transport's inbox and hands every reply to f; see transport.Transport.
// It never waits for a reply: when nobody listens, the server's
// no-responders status arrives within a round trip and f gets
// transport.ErrNoResponders. f runs on the connection's read loop, so a reply costs
// no goroutine hand-off; only a body sent by reference is fetched, and
// handed to f, on a goroutine of its own.
func (t *Transport) RequestFunc(ctx context.Context, subject string, m wire.Msg, f func(wire.Msg, error)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, token := t.newReply()
	c := &call{t: t, token: token, subject: subject, fn: f}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("natstransport: request %s: transport %w", subject, transport.ErrClosed)
	}
	t.calls[token] = c
	t.mu.Unlock()
	if err := t.publish(subject, reply, m, c); err != nil {
		c.Close()
		return nil, err
	}
	return c.Close, nil
}

// call is one outstanding request: its replies go to fn, one at a time
// (fnMu), on the connection's read loop.
type call struct {
	t       *Transport
	token   string
	subject string
	closed  atomic.Bool
	fn      func(wire.Msg, error)
	fnMu    sync.Mutex

	// ref is the request's body sent by reference, deleted once the call
	// is closed.
	ref atomic.Pointer[string]
}

// dispatch hands a reply to fn: the no-responders status as the call's
// last word, a body sent by reference once fetched.
func (c *call) dispatch(m *nats.Msg) {
	if isNoResponders(m) {
		if c.closed.CompareAndSwap(false, true) {
			c.forget()
			c.handOver(wire.Msg{}, fmt.Errorf("natstransport: request %s: %w", c.subject, transport.ErrNoResponders), true)
		}
		return
	}
	msg := fromNats(m)
	if _, ref := msg.Header[PayloadHeader]; ref {
		go func() {
			msg, err := c.t.resolve(msg, c.subject)
			c.handOver(msg, err, false)
		}()
		return
	}
	c.handOver(msg, nil, false)
}

// handOver calls fn unless the call was closed meanwhile (last: the call's
// final error, sent after closing it).
func (c *call) handOver(m wire.Msg, err error, last bool) {
	c.fnMu.Lock()
	defer c.fnMu.Unlock()
	if last || !c.closed.Load() {
		c.fn(m, err)
	}
}

// Close stops receiving. Safe to call twice.
func (c *call) Close() {
	if c.closed.CompareAndSwap(false, true) {
		c.forget()
	}
}

func (c *call) forget() {
	c.t.mu.Lock()
	if c.t.calls[c.token] == c {
		delete(c.t.calls, c.token)
	}
	c.t.mu.Unlock()
	c.dropBody()
}

// dropBody deletes the request's body sent by reference: the exchange is
// over, no reply will need it read again.
func (c *call) dropBody() {
	if ref := c.ref.Swap(nil); ref != nil {
		c.t.dropSent(*ref, false)
	}
}

// shut ends the call as its transport closes: fn gets ErrClosed as its
// last word.
func (c *call) shut() {
	c.dropBody()
	if c.closed.CompareAndSwap(false, true) {
		c.handOver(wire.Msg{}, fmt.Errorf("natstransport: call %s: transport %w", c.subject, transport.ErrClosed), true)
	}
}
