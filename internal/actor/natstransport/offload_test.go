package natstransport

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/actor"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

// memOffloader is an in-memory Offloader shared by both ends of a test.
type memOffloader struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (o *memOffloader) PutPayload(_ context.Context, data []byte) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ref := fmt.Sprint("obj-", len(o.objs))
	o.objs[ref] = bytes.Clone(data)
	return ref, nil
}

func (o *memOffloader) GetPayload(_ context.Context, ref string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
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
		tr, err := New(nc, Config{Offloader: off})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	server, client := conn("server"), conn("client")
	big := bytes.Repeat([]byte("formica "), 3<<20/8) // 3 MiB, over the 1 MiB default
	sub, err := server.Serve("big.echo", "", 0, func(_ context.Context, m actor.Msg, r actor.Replier) {
		r.Reply(actor.Msg{Type: "echo", Data: append(m.Data, '!')})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	server.Flush(context.Background())
	call, err := client.Request(context.Background(), "big.echo", actor.Msg{Type: "req", Data: big})
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
}
