package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// ReplyBuffer is how many replies a Call holds for its reader before it
// drops progress; a reply that is not progress is never dropped.
const ReplyBuffer = 16

// Request sends m to subject on tr, like RequestFunc, for a caller that
// reads the replies itself, from one goroutine (Call.Next). It never waits
// for a reply; read replies, including ErrNoResponders, from the Call.
func Request(ctx context.Context, tr Transport, subject string, m wire.Msg) (Call, error) {
	c := &call{subject: subject, wake: make(chan struct{}, 1)}
	stop, err := tr.RequestFunc(ctx, subject, m, c.deliver)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.stop = stop
	closed := c.closed
	c.mu.Unlock()
	if closed {
		stop()
	}
	return c, nil
}

// call holds a request's replies until its reader takes them.
type call struct {
	subject string
	wake    chan struct{} // a reply or the end arrived

	mu      sync.Mutex
	stop    func()
	replies []wire.Msg
	end     error // the request's last word, read after the replies
	closed  bool
}

func (c *call) deliver(m wire.Msg, err error) {
	c.mu.Lock()
	switch {
	case c.closed || c.end != nil:
	case err != nil:
		c.end = err
	case len(c.replies) >= ReplyBuffer && m.Type == string(wire.TypeProgress):
		// The reader is slow; a later keep-alive says as much.
	default:
		c.replies = append(c.replies, m)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Next returns the next reply; see Call.
func (c *call) Next(ctx context.Context, idle time.Duration) (wire.Msg, error) {
	var expired <-chan time.Time
	if idle > 0 {
		t := time.NewTimer(idle)
		defer t.Stop()
		expired = t.C
	}
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return wire.Msg{}, fmt.Errorf("call %s: %w", c.subject, ErrClosed)
		case len(c.replies) > 0:
			m := c.replies[0]
			c.replies = c.replies[1:]
			c.mu.Unlock()
			return m, nil
		case c.end != nil:
			c.mu.Unlock()
			return wire.Msg{}, c.end
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-expired:
			return wire.Msg{}, fmt.Errorf("call %s: no reply for %v: %w", c.subject, idle, ErrSilent)
		case <-ctx.Done():
			return wire.Msg{}, context.Cause(ctx)
		}
	}
}

// Close stops receiving; see Call.
func (c *call) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.replies = true, nil
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
