package natstransport

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// memOffloader is an in-memory Offloader shared by both ends of a test.
type memOffloader struct {
	mu   sync.Mutex
	objs map[string][]byte
	from []string // GetPayload's from, in order
}

func (o *memOffloader) PutPayload(_ context.Context, _ string, data []byte) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ref := fmt.Sprint("obj-", len(o.objs))
	o.objs[ref] = bytes.Clone(data)
	return ref, nil
}

func (o *memOffloader) GetPayload(_ context.Context, from, ref string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.from = append(o.from, from)
	d, ok := o.objs[ref]
	if !ok {
		return nil, fmt.Errorf("no object %s", ref)
	}
	return d, nil
}

func TestBodiesLargerThanMaxPayloadTravelByReference(t *testing.T) {
	srv := brokertest.Start(t)
	off := &memOffloader{objs: map[string][]byte{}}
	conn := func(name string) *Transport {
		nc, err := srv.Connect(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		tr, err := New(nc, Config{Offloader: off, Sender: func(subject string) string {
			if subject == "big.echo" {
				return "echo's"
			}
			return "" // no references on anything else
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	server, client := conn("server"), conn("client")
	big := bytes.Repeat([]byte("formica "), 3<<20/8) // 3 MiB, over the 1 MiB default
	sub, err := server.Serve("big.echo", "", 0, func(_ context.Context, m wire.Msg, r transport.Replier) {
		r.Reply(wire.Msg{Type: "echo", Data: append(m.Data, '!')})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	server.Flush(context.Background())
	call, err := transport.Request(context.Background(), client, "big.echo", wire.Msg{Type: "req", Data: big})
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	m, err := call.Next(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, append(bytes.Clone(big), '!')) || m.Type != "echo" {
		t.Fatalf("got %d bytes of type %q, want %d", len(m.Data), m.Type, len(big)+1)
	}
	if _, ok := m.Header[PayloadHeader]; ok {
		t.Fatal("reference header leaked to the receiver")
	}
	if len(off.objs) != 2 {
		t.Fatalf("%d objects stored, want the request and the reply", len(off.objs))
	}
	// Both ends fetched a body sent on, or in answer to, big.echo: read as
	// the party Sender names for it.
	if len(off.from) != 2 || off.from[0] != "echo's" || off.from[1] != "echo's" {
		t.Fatalf("bodies read as sent by %q, want echo's twice", off.from)
	}

	// A reference on a subject whose sender may send none is refused unread.
	other, err := server.Serve("big.other", "", 0, func(_ context.Context, m wire.Msg, r transport.Replier) {
		r.Reply(wire.Msg{Type: "echo", Data: m.Data})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	server.Flush(context.Background())
	call2, err := transport.Request(context.Background(), client, "big.other", wire.Msg{Type: "req", Data: big})
	if err != nil {
		t.Fatal(err)
	}
	defer call2.Close()
	if m, err := call2.Next(context.Background(), 10*time.Second); err != nil || m.Type != string(wire.TypeError) {
		t.Fatalf("a reference on big.other: %q %v, want an error reply", m.Type, err)
	}
	if len(off.from) != 2 {
		t.Fatalf("bodies read as sent by %q, want none more", off.from)
	}
}
