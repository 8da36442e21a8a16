package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// TestCallOrder drives a call's reply path directly: progress past the
// buffer is dropped, other replies never are and come out in order, and
// the request's last word comes after every reply.
func TestCallOrder(t *testing.T) {
	c := &call{subject: "s", wake: make(chan struct{}, 1)}
	var want []string
	for i := range ReplyBuffer {
		c.deliver(wire.Msg{Type: string(wire.TypeProgress), Data: fmt.Appendf(nil, "p%d", i)}, nil)
		want = append(want, fmt.Sprintf("p%d", i))
	}
	c.deliver(wire.Msg{Type: string(wire.TypeProgress), Data: []byte("dropped")}, nil)
	c.deliver(wire.Msg{Type: "partial", Data: []byte("a")}, nil)
	c.deliver(wire.Msg{Type: string(wire.TypeProgress), Data: []byte("dropped too")}, nil)
	c.deliver(wire.Msg{Type: "final", Data: []byte("b")}, nil)
	c.deliver(wire.Msg{}, ErrNoResponders)
	want = append(want, "a", "b")
	ctx := context.Background()
	for _, w := range want {
		m, err := c.Next(ctx, time.Second)
		if err != nil || string(m.Data) != w {
			t.Fatalf("Next = %q, %v; want %q", m.Data, err, w)
		}
	}
	if _, err := c.Next(ctx, time.Second); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("after the replies: %v, want the last word", err)
	}
	c.Close()
	if _, err := c.Next(ctx, time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want closed", err)
	}
}
