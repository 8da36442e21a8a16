package broker

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// countingConn counts the write deadlines set on the pipe itself.
type countingConn struct {
	net.Conn
	sets int
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.sets++
	return c.Conn.SetWriteDeadline(t)
}

func lazyPipe(t *testing.T) (*lazyDeadlineConn, *countingConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	inner := &countingConn{Conn: a}
	return &lazyDeadlineConn{Conn: inner}, inner, b
}

// write does what nats.go's flusher does for each write: deadline, write,
// deadline cleared.
func write(c net.Conn, span time.Duration, p []byte) error {
	c.SetWriteDeadline(time.Now().Add(span))
	_, err := c.Write(p)
	c.SetWriteDeadline(time.Time{})
	return err
}

func TestLazyDeadlineMovesThePipesDeadlineRarely(t *testing.T) {
	c, inner, peer := lazyPipe(t)
	go io.Copy(io.Discard, peer)
	for range 1000 {
		if err := write(c, time.Minute, []byte("PUB x 1\r\na\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	if inner.sets != 1 {
		t.Errorf("the pipe's write deadline was set %d times for 1000 writes, want 1", inner.sets)
	}
}

func TestLazyDeadlineStillBoundsAStuckWrite(t *testing.T) {
	c, _, _ := lazyPipe(t) // nobody reads the other end
	err := write(c, 20*time.Millisecond, []byte("stuck"))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a pipe nobody reads: %v, want a deadline error", err)
	}
}

func TestLazyDeadlineNeverCutsAWriteShort(t *testing.T) {
	c, _, peer := lazyPipe(t)
	go io.Copy(io.Discard, peer)
	// A deadline asked for long ago must not fail a write without one.
	if err := write(c, 30*time.Millisecond, []byte("a")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := c.Write([]byte("b")); err != nil {
		t.Fatalf("a write with no deadline asked for, after an old one passed: %v", err)
	}
	// Nor a write with a new deadline.
	if err := write(c, 30*time.Millisecond, []byte("c")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := write(c, time.Minute, []byte("d")); err != nil {
		t.Fatalf("a write with a fresh deadline, after an old one passed: %v", err)
	}
}

// Connections made in-process carry the lazy deadline, and work.
func TestInProcessConnectionsTakeTheLazyDeadline(t *testing.T) {
	s, err := StartServer(t.Context(), ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	c, err := pipeServer{s.ns}.InProcessConn()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, ok := c.(*lazyDeadlineConn); !ok {
		t.Fatalf("in-process conn is %T", c)
	}
	resp, err := s.Connect("responder")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	req, err := s.Connect("requester")
	if err != nil {
		t.Fatal(err)
	}
	defer req.Close()
	if _, err := resp.Subscribe("echo", func(m *nats.Msg) { m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	resp.Flush()
	for i := range 100 {
		m, err := req.Request("echo", []byte{byte(i)}, 5*time.Second)
		if err != nil || len(m.Data) != 1 || m.Data[0] != byte(i) {
			t.Fatalf("round trip %d: %v %v", i, m, err)
		}
	}
}
