package memtransport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/internal/ring"
	"github.com/formica-run/formica/internal/wire"
)

// RequestFunc sends m to subject with an inbox of its own and hands every
// reply to f, on a goroutine that lives while replies wait for f; see
// transport.Transport. When nobody listens, f gets
// transport.ErrNoResponders.
func (t *Transport) RequestFunc(ctx context.Context, subject string, m wire.Msg, fn func(wire.Msg, error)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &call{t: t, subject: subject, fn: fn}
	c.inbox = &sub{subject: t.net.inbox(), to: c}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("memtransport: request %s: transport %w", subject, transport.ErrClosed)
	}
	t.calls[c] = struct{}{}
	t.net.add(c.inbox)
	t.mu.Unlock()
	heard, err := t.send(subject, c.inbox.subject, m)
	if err != nil {
		c.Close()
		return nil, err
	}
	if !heard {
		c.finish(fmt.Errorf("memtransport: request %s: %w", subject, transport.ErrNoResponders))
	}
	return c.Close, nil
}

// delivery is a reply, or the call's end (err).
type delivery struct {
	m   wire.Msg
	err error
}

// call is one outstanding request. Its replies wait in queue for the
// drain goroutine, which hands them to fn.
type call struct {
	t       *Transport
	subject string
	inbox   *sub
	fn      func(wire.Msg, error)
	closed  atomic.Bool

	mu       sync.Mutex
	queue    ring.Ring[delivery]
	draining bool // a drain goroutine runs
}

func (c *call) receive(_, _ string, m wire.Msg) { c.deliver(delivery{m: m}) }

// deliver queues d; once the call is closed only its last word (an
// error) still goes.
func (c *call) deliver(d delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() && d.err == nil {
		return
	}
	c.queue.Push(d)
	if !c.draining {
		c.draining = true
		go c.drain()
	}
}

// pop takes the oldest waiting delivery.
func (c *call) pop() (delivery, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.queue.Pop()
	if !ok {
		c.draining = false
	}
	return d, ok
}

// drain hands waiting replies to fn one at a time, in order, and ends when
// none is left: a call waiting for its replies holds no goroutine. An
// error is the call's last word and comes even though the call is closed.
func (c *call) drain() {
	for d, ok := c.pop(); ok; d, ok = c.pop() {
		if d.err != nil || !c.closed.Load() {
			c.fn(d.m, d.err)
		}
	}
}

// Close stops receiving. Safe to call twice.
func (c *call) Close() { c.finish(nil) }

// finish ends the call once and forgets its inbox, so later replies are
// dropped; fn gets err as its last word (nothing when nil: its caller
// stopped it).
func (c *call) finish(err error) {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.t.net.remove(c.inbox)
	c.t.mu.Lock()
	delete(c.t.calls, c)
	c.t.mu.Unlock()
	if err != nil {
		c.deliver(delivery{err: err})
	}
}
