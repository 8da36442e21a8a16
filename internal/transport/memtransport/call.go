package memtransport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// Request sends m to subject with an inbox of its own and returns at once;
// when nobody listens, the first Next returns transport.ErrNoResponders.
// ctx is only checked before sending.
func (t *Transport) Request(ctx context.Context, subject string, m wire.Msg) (transport.Call, error) {
	c, err := t.request(ctx, subject, m, nil)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// RequestFunc sends m like Request and hands every reply to f, on a
// goroutine that lives while replies wait for f; see transport.Transport.
func (t *Transport) RequestFunc(ctx context.Context, subject string, m wire.Msg, f func(wire.Msg, error)) (func(), error) {
	c, err := t.request(ctx, subject, m, f)
	if err != nil {
		return nil, err
	}
	return c.Close, nil
}

func (t *Transport) request(ctx context.Context, subject string, m wire.Msg, fn func(wire.Msg, error)) (*call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &call{t: t, subject: subject, fn: fn}
	if fn == nil {
		c.wake, c.done = make(chan struct{}, 1), make(chan struct{})
	}
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
		err := fmt.Errorf("memtransport: request %s: %w", subject, transport.ErrNoResponders)
		if fn != nil {
			c.finish(err)
		} else {
			c.deliver(delivery{err: err})
		}
	}
	return c, nil
}

// delivery is a reply, or the call's end (err).
type delivery struct {
	m   wire.Msg
	err error
}

// call is one outstanding request. Its replies wait in queue: for Next,
// which wake rouses, or for the drain goroutine of a RequestFunc (fn set).
// Past ReplyBuffer waiting replies, progress is dropped for a reader that
// is behind, but never anything else, so a final reply is never lost.
type call struct {
	t       *Transport
	subject string
	inbox   *sub
	fn      func(wire.Msg, error)
	closed  atomic.Bool
	err     error         // no responders, owned by the reader
	wake    chan struct{} // room for one: a reply is waiting
	done    chan struct{} // closed when the call is

	mu       sync.Mutex
	queue    []delivery
	draining bool // a drain goroutine runs
}

func (c *call) receive(_, _ string, m wire.Msg) { c.deliver(delivery{m: m}) }

// deliver queues d; once the call is closed only a RequestFunc's last
// word (an error) still goes.
func (c *call) deliver(d delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() && (c.fn == nil || d.err == nil) {
		return
	}
	if c.fn == nil && len(c.queue) >= c.t.cfg.ReplyBuffer && d.err == nil && d.m.Type == string(wire.TypeProgress) {
		c.t.cfg.Logger.Debug("dropped progress: caller reads too slowly", "subject", c.subject)
		return
	}
	c.queue = append(c.queue, d)
	switch {
	case c.fn == nil:
		select {
		case c.wake <- struct{}{}:
		default:
		}
	case !c.draining:
		c.draining = true
		go c.drain()
	}
}

// pop takes the oldest waiting delivery.
func (c *call) pop() (delivery, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.draining = false
		c.queue = nil
		return delivery{}, false
	}
	d := c.queue[0]
	c.queue[0] = delivery{}
	c.queue = c.queue[1:]
	return d, true
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

// Next returns the next reply; see transport.Call.
func (c *call) Next(ctx context.Context, idle time.Duration) (wire.Msg, error) {
	var expired <-chan time.Time
	if idle > 0 {
		timer := time.NewTimer(idle)
		defer timer.Stop()
		expired = timer.C
	}
	for {
		if c.closed.Load() {
			return wire.Msg{}, fmt.Errorf("memtransport: call %s: %w", c.subject, transport.ErrClosed)
		}
		if c.err != nil {
			return wire.Msg{}, c.err
		}
		if d, ok := c.pop(); ok {
			c.err = d.err
			return d.m, d.err
		}
		select {
		case <-c.wake:
		case <-c.done:
		case <-expired:
			return wire.Msg{}, fmt.Errorf("memtransport: call %s: no reply for %v: %w", c.subject, idle, transport.ErrSilent)
		case <-ctx.Done():
			return wire.Msg{}, context.Cause(ctx)
		}
	}
}

// Close stops receiving and wakes a blocked Next. Safe to call twice.
func (c *call) Close() { c.finish(nil) }

// finish ends the call once and forgets its inbox, so later replies are
// dropped. A blocked Next returns ErrClosed; a RequestFunc's function gets
// err as its last word (nothing when nil: its caller stopped it).
func (c *call) finish(err error) {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.t.net.remove(c.inbox)
	c.t.mu.Lock()
	delete(c.t.calls, c)
	c.t.mu.Unlock()
	if c.fn == nil {
		close(c.done)
	} else if err != nil {
		c.deliver(delivery{err: err})
	}
}
