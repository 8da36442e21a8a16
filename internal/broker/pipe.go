package broker

import (
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// pipeServer hands nats.go in-process connections whose write deadlines are
// cheap. The client sets a deadline before every write and clears it after
// (FlusherTimeout); on the server's net.Pipe each of those starts or stops a
// runtime timer, an allocation and a lock on the timer heap per write, a
// noticeable share of a spawn's cost in one process.
type pipeServer struct{ ns *server.Server }

func (p pipeServer) InProcessConn() (net.Conn, error) {
	c, err := p.ns.InProcessConn()
	if err != nil {
		return nil, err
	}
	return &lazyDeadlineConn{Conn: c}, nil
}

// lazyDeadlineConn keeps the pipe's write deadline ahead of the one asked
// for instead of moving it on every call: a write asked to end by t may run
// until t plus one more deadline's span, never less than asked, and a write
// with no deadline asked for runs with none. The pipe's deadline therefore
// moves about once per span instead of twice per write.
type lazyDeadlineConn struct {
	net.Conn
	mu    sync.Mutex
	want  time.Time // the write deadline last asked for; zero: none
	limit time.Time // the deadline set on the pipe; zero: none
}

func (c *lazyDeadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want = t
	if t.IsZero() || (!c.limit.IsZero() && !c.limit.Before(t)) {
		return nil
	}
	c.limit = t.Add(time.Until(t))
	return c.Conn.SetWriteDeadline(c.limit)
}

func (c *lazyDeadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want, c.limit = t, t
	return c.Conn.SetDeadline(t)
}

func (c *lazyDeadlineConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.want.IsZero() && !c.limit.IsZero() {
		c.limit = time.Time{}
		if err := c.Conn.SetWriteDeadline(c.limit); err != nil {
			c.mu.Unlock()
			return 0, err
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}
