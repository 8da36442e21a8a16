package transporttest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// gate is a blocking handler that counts how many run at once.
type gate struct {
	started chan struct{}
	release chan struct{}
	now     atomic.Int32
	peak    atomic.Int32
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 1000), release: make(chan struct{})}
}

func (g *gate) handle(ctx context.Context, m wire.Msg, r transport.Replier) {
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	g.now.Add(-1)
	_ = r.Reply(wire.Msg{Type: "done", Data: m.Data})
}

// final reads past progress to the first other reply.
func final(t *testing.T, ctx context.Context, call transport.Call) wire.Msg {
	t.Helper()
	for {
		m, err := call.Next(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if m.Type != string(wire.TypeProgress) {
			return m
		}
	}
}

func testBoundedConcurrency(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{MaxPending: 2})
	ctx := bounded(t)
	subj := subject(t)
	g := newGate()
	serve(t, ctx, server, subj, 2, g.handle)

	var calls []transport.Call
	for range 2 {
		calls = append(calls, request(t, ctx, client, subj, wire.Msg{Type: "exec"}))
		recv(t, g.started, "a handler to start")
	}
	// Two more wait in the queue; they reach the server in order, before the fifth.
	for range 2 {
		calls = append(calls, request(t, ctx, client, subj, wire.Msg{Type: "exec"}))
	}
	over := request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	m := final(t, ctx, over)
	if err := wire.MsgError(m); !errors.Is(err, transport.ErrOverloaded) {
		t.Fatalf("fifth request got %+v (error %v), want an overloaded error reply", m, err)
	}
	if string(m.Data) != string(wire.CodeOverloaded) {
		t.Errorf("overloaded reply body = %q, want %q", m.Data, wire.CodeOverloaded)
	}
	close(g.release)
	for i, call := range calls {
		if m := final(t, ctx, call); m.Type != "done" {
			t.Errorf("call %d: got %+v, want done", i, m)
		}
	}
	if p := g.peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

func testUnboundedConcurrency(t *testing.T, newPair NewPair) {
	const n = 20
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	var barrier sync.WaitGroup
	barrier.Add(n)
	serve(t, ctx, server, subj, 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		barrier.Done()
		barrier.Wait() // only returns if all n run at once
		_ = r.Reply(wire.Msg{Type: "done"})
	})
	calls := make([]transport.Call, n)
	for i := range calls {
		calls[i] = request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	}
	for _, call := range calls {
		if m := final(t, ctx, call); m.Type != "done" {
			t.Fatalf("got %+v, want done", m)
		}
	}
}

func testStop(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	cause := make(chan error, 1)
	started := make(chan struct{}, 1)
	sub := serve(t, ctx, server, subj, 1, func(hctx context.Context, m wire.Msg, r transport.Replier) {
		started <- struct{}{}
		select {
		case <-hctx.Done():
			cause <- hctx.Err()
		case <-ctx.Done():
			cause <- errors.New("handler context never cancelled")
		}
		_ = r.Reply(wire.Msg{Type: "cancelled"})
	})
	running := request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	recv(t, started, "the handler to start")
	queued := request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := server.Flush(ctx); err != nil { // the queued request has reached the server's client
		t.Fatal(err)
	}
	if err := sub.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := sub.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := recv(t, cause, "the handler to see its context end"); !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx: %v, want context.Canceled", err)
	}
	if m := final(t, ctx, running); m.Type != "cancelled" {
		t.Errorf("running request got %+v", m)
	}
	m := final(t, ctx, queued)
	if err := wire.MsgError(m); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("queued request got %+v (error %v), want a closed error reply", m, err)
	}
	// Nobody serves the subject any more.
	after := request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	if _, err := after.Next(ctx, 5*time.Second); !errors.Is(err, transport.ErrNoResponders) {
		t.Errorf("request after Stop: %v, want ErrNoResponders", err)
	}
}

func testPublish(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	type seen struct {
		Msg      wire.Msg
		NoReply  bool
		ReplyErr error
	}
	got := make(chan seen, 1)
	serve(t, ctx, server, subj, 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		got <- seen{Msg: m, NoReply: r.NoReply(), ReplyErr: r.Reply(wire.Msg{Type: "ignored"})}
	})
	sent := wire.Msg{Type: "event", Header: map[string]string{"Run": "r1", "Traceparent": "00-abc-def-01"}, Data: []byte("x")}
	if err := client.Publish(ctx, subj, sent); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	want := seen{Msg: sent, NoReply: true}
	want.Msg.Subject = subj
	if diff := cmp.Diff(want, recv(t, got, "the published message")); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
	// A message with no type and no headers arrives as just its body.
	if err := client.Publish(ctx, subj, wire.Msg{Data: []byte("bare")}); err != nil {
		t.Fatal(err)
	}
	want = seen{Msg: wire.Msg{Subject: subj, Data: []byte("bare")}, NoReply: true}
	if diff := cmp.Diff(want, recv(t, got, "the bare message")); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
}

func testHandlerPanic(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	serve(t, ctx, server, subj, 1, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		if string(m.Data) == "boom" {
			panic("boom")
		}
		_ = r.Reply(wire.Msg{Type: "ok"})
	})
	m := final(t, ctx, request(t, ctx, client, subj, wire.Msg{Data: []byte("boom")}))
	var re *wire.Error
	if err := wire.MsgError(m); !errors.As(err, &re) || re.Code != wire.CodeInternal {
		t.Errorf("panicking handler replied %+v, want an internal error reply", m)
	}
	// The subscription survives and its slot was given back.
	if m := final(t, ctx, request(t, ctx, client, subj, wire.Msg{})); m.Type != "ok" {
		t.Errorf("after panic got %+v, want ok", m)
	}
}
