package natstransport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// Request publishes m to subject with a reply subject under this
// transport's inbox and returns at once. It never waits for a reply: when
// nobody listens, the server's no-responders status arrives within a round
// trip and the first Next returns transport.ErrNoResponders. ctx is only
// checked before sending; Next takes the ctx that bounds the wait.
func (t *Transport) Request(ctx context.Context, subject string, m wire.Msg) (transport.Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, token := t.newReply()
	c := &call{t: t, token: token, subject: subject, ch: make(chan *nats.Msg, t.cfg.ReplyBuffer)}
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
	return c, nil
}

// RequestFunc publishes m like Request and hands every reply to f; see
// transport.Transport. f runs on the connection's read loop, so a reply costs
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

// call is one outstanding request. Replies come in on the read loop
// (deliver) and leave through Next on the caller's goroutine, which is also
// where they are converted, keeping the read loop short.
//
// Ordering: while overflow is empty replies go to ch; once ch was full,
// everything goes to overflow until Next has emptied it, so every message in
// overflow is newer than every message in ch. overflow is unbounded so a
// final reply is never lost; only a peer sending many non-progress replies
// to a caller that does not read can grow it.
type call struct {
	t       *Transport
	token   string
	subject string
	ch      chan *nats.Msg
	closed  atomic.Bool
	err     error // terminal (no responders), owned by the reader
	// fn, when set, takes every reply instead of ch (RequestFunc); fnMu
	// makes its calls one at a time.
	fn   func(wire.Msg, error)
	fnMu sync.Mutex

	mu       sync.Mutex
	overflow []*nats.Msg
	chClosed bool // ch is closed

	// ref is the request's body sent by reference, deleted once the call
	// is closed.
	ref atomic.Pointer[string]
}

func (c *call) deliver(m *nats.Msg) {
	if c.fn != nil {
		c.dispatch(m)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chClosed {
		return
	}
	if len(c.overflow) == 0 {
		select {
		case c.ch <- m:
			return
		default:
		}
	}
	if isProgress(m) {
		c.t.log.Debug("dropped progress: caller reads too slowly", "subject", c.subject)
		return
	}
	c.overflow = append(c.overflow, m)
}

// Next returns the next reply; see transport.Call.
func (c *call) Next(ctx context.Context, idle time.Duration) (wire.Msg, error) {
	if c.closed.Load() {
		return wire.Msg{}, fmt.Errorf("natstransport: call %s: %w", c.subject, transport.ErrClosed)
	}
	if c.err != nil {
		return wire.Msg{}, c.err
	}
	c.mu.Lock()
	select {
	case m, ok := <-c.ch:
		c.mu.Unlock()
		return c.received(m, ok)
	default:
	}
	if len(c.overflow) > 0 {
		m := c.overflow[0]
		c.overflow[0] = nil
		c.overflow = c.overflow[1:]
		if len(c.overflow) == 0 {
			c.overflow = nil
		}
		c.mu.Unlock()
		return c.received(m, true)
	}
	c.mu.Unlock()

	// Nothing buffered and overflow empty: anything that arrives now goes
	// to ch, so waiting on ch alone is enough.
	var expired <-chan time.Time
	if idle > 0 {
		timer := time.NewTimer(idle)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case m, ok := <-c.ch:
		return c.received(m, ok)
	case <-expired:
		if c.t.nc.IsClosed() {
			return wire.Msg{}, fmt.Errorf("natstransport: call %s: no reply for %v: %w (%w)", c.subject, idle, transport.ErrSilent, nats.ErrConnectionClosed)
		}
		return wire.Msg{}, fmt.Errorf("natstransport: call %s: no reply for %v: %w", c.subject, idle, transport.ErrSilent)
	case <-ctx.Done():
		return wire.Msg{}, context.Cause(ctx)
	}
}

func (c *call) received(m *nats.Msg, ok bool) (wire.Msg, error) {
	if !ok {
		return wire.Msg{}, fmt.Errorf("natstransport: call %s: %w", c.subject, transport.ErrClosed)
	}
	if isNoResponders(m) {
		c.err = fmt.Errorf("natstransport: request %s: %w", c.subject, transport.ErrNoResponders)
		return wire.Msg{}, c.err
	}
	return c.t.receive(m, c.subject)
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

// Close stops receiving and wakes a blocked Next. Safe to call twice.
func (c *call) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.forget()
	if c.fn == nil {
		c.shut()
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

// shut closes ch so a blocked Next returns ErrClosed; a RequestFunc's
// function gets ErrClosed as its last word.
func (c *call) shut() {
	c.dropBody()
	if c.fn != nil {
		if c.closed.CompareAndSwap(false, true) {
			c.handOver(wire.Msg{}, fmt.Errorf("natstransport: call %s: transport %w", c.subject, transport.ErrClosed), true)
		}
		return
	}
	c.closed.Store(true)
	c.mu.Lock()
	if !c.chClosed {
		c.chClosed = true
		close(c.ch)
		c.overflow = nil
	}
	c.mu.Unlock()
}
