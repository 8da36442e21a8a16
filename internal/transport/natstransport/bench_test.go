package natstransport

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// The request benchmarks compare one round trip of a raw nats.go
// nc.Request against Transport.Request + Next + Close, requester and
// responder on separate connections to one embedded server, 128-byte
// payloads.

var payload = bytes.Repeat([]byte("x"), 128)

func BenchmarkRawRequest(b *testing.B) {
	for _, l := range []link{inProcess, tcp} {
		b.Run(l.String(), func(b *testing.B) {
			ns := startServer(b, l)
			srv, cli := connect(b, ns, l), connect(b, ns, l)
			sub, err := srv.Subscribe("bench", func(m *nats.Msg) { _ = m.Respond(m.Data) })
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := srv.Flush(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cli.Request("bench", payload, 5*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawRequestTyped is nc.RequestMsg with the type header both
// ways: what headers alone cost, so the rest of the gap is the transport's.
func BenchmarkRawRequestTyped(b *testing.B) {
	for _, l := range []link{inProcess, tcp} {
		b.Run(l.String(), func(b *testing.B) {
			ns := startServer(b, l)
			srv, cli := connect(b, ns, l), connect(b, ns, l)
			sub, err := srv.Subscribe("bench", func(m *nats.Msg) {
				_ = m.RespondMsg(&nats.Msg{Header: nats.Header{TypeHeader: {"result"}}, Data: m.Data})
			})
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := srv.Flush(); err != nil {
				b.Fatal(err)
			}
			req := &nats.Msg{Subject: "bench", Header: nats.Header{TypeHeader: {"exec"}}, Data: payload}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cli.RequestMsg(req, 5*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTransportRequest(b *testing.B) {
	for _, l := range []link{inProcess, tcp} {
		for _, bc := range []struct {
			name string
			max  int
		}{{"unbounded", 0}, {"max16", 16}} {
			b.Run(l.String()+"/"+bc.name, func(b *testing.B) {
				ns := startServer(b, l)
				srv := newTransport(b, connect(b, ns, l), Config{})
				cli := newTransport(b, connect(b, ns, l), Config{})
				ctx := context.Background()
				if _, err := srv.Serve("bench", "", bc.max, func(ctx context.Context, m wire.Msg, r transport.Replier) {
					_ = r.Reply(wire.Msg{Type: "result", Data: m.Data})
				}); err != nil {
					b.Fatal(err)
				}
				if err := srv.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				req := wire.Msg{Type: "exec", Data: payload}
				b.ReportAllocs()
				for b.Loop() {
					call, err := transport.Request(ctx, cli, "bench", req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := call.Next(ctx, 5*time.Second); err != nil {
						b.Fatal(err)
					}
					call.Close()
				}
			})
		}
	}
}

// BenchmarkTransportRequestFunc is one round trip whose reply goes to a
// function on the read loop (RequestFunc), as a coordinator holds a
// placement: no goroutine waits for the reply.
func BenchmarkTransportRequestFunc(b *testing.B) {
	for _, l := range []link{inProcess, tcp} {
		b.Run(l.String(), func(b *testing.B) {
			ns := startServer(b, l)
			srv := newTransport(b, connect(b, ns, l), Config{})
			cli := newTransport(b, connect(b, ns, l), Config{})
			ctx := context.Background()
			if _, err := srv.Serve("bench", "", 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
				_ = r.Reply(wire.Msg{Type: "result", Data: m.Data})
			}); err != nil {
				b.Fatal(err)
			}
			if err := srv.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			req := wire.Msg{Type: "exec", Data: payload}
			got := make(chan error, 1)
			f := func(_ wire.Msg, err error) { got <- err }
			b.ReportAllocs()
			for b.Loop() {
				stop, err := cli.RequestFunc(ctx, "bench", req, f)
				if err != nil {
					b.Fatal(err)
				}
				if err := <-got; err != nil {
					b.Fatal(err)
				}
				stop()
			}
		})
	}
}

// BenchmarkTransportRequestParallel is the throughput view: many callers
// on one transport, as a coordinator placing many spawns at once.
func BenchmarkTransportRequestParallel(b *testing.B) {
	ns := startServer(b, inProcess)
	srv := newTransport(b, connect(b, ns, inProcess), Config{})
	cli := newTransport(b, connect(b, ns, inProcess), Config{})
	ctx := context.Background()
	if _, err := srv.Serve("bench", "", 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		_ = r.Reply(wire.Msg{Type: "result", Data: m.Data})
	}); err != nil {
		b.Fatal(err)
	}
	if err := srv.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	req := wire.Msg{Type: "exec", Data: payload}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			call, err := transport.Request(ctx, cli, "bench", req)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := call.Next(ctx, 5*time.Second); err != nil {
				b.Error(err)
				return
			}
			call.Close()
		}
	})
}

func BenchmarkRawRequestParallel(b *testing.B) {
	ns := startServer(b, inProcess)
	srv, cli := connect(b, ns, inProcess), connect(b, ns, inProcess)
	sub, err := srv.Subscribe("bench", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := srv.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cli.Request("bench", payload, 5*time.Second); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
