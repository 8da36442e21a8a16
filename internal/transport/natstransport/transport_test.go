package natstransport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/transporttest"
	"github.com/formica-run/formica/internal/wire"
)

func TestConformance(t *testing.T) {
	for _, l := range []link{tcp, inProcess} {
		t.Run(l.String(), func(t *testing.T) { transporttest.Run(t, pair(l)) })
	}
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestInboxPrefix checks that reply subjects live under the connection's
// custom inbox prefix by default, and under Config.InboxPrefix when set, so
// permissions can be granted narrowly.
func TestInboxPrefix(t *testing.T) {
	ns := startServer(t, tcp)
	cases := []struct {
		name string
		opts []nats.Option
		cfg  Config
		want string
	}{
		{"default", nil, Config{}, "_INBOX."},
		{"connection prefix", []nats.Option{nats.CustomInboxPrefix("_I.worker1")}, Config{}, "_I.worker1."},
		{"config prefix", []nats.Option{nats.CustomInboxPrefix("_I.worker1")}, Config{InboxPrefix: "_R.coord"}, "_R.coord."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := bounded(t)
			nc := connect(t, ns, tcp, c.opts...)
			tr := newTransport(t, nc, c.cfg)
			replies := make(chan string, 1)
			sub, err := nc.Subscribe("prefix.test", func(m *nats.Msg) {
				replies <- m.Reply
				_ = m.Respond([]byte("ok"))
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			call, err := transport.Request(ctx, tr, "prefix.test", wire.Msg{})
			if err != nil {
				t.Fatal(err)
			}
			defer call.Close()
			if m, err := call.Next(ctx, 5*time.Second); err != nil || string(m.Data) != "ok" {
				t.Fatalf("Next = %+v, %v", m, err)
			}
			if reply := <-replies; !strings.HasPrefix(reply, c.want) {
				t.Errorf("reply subject %q, want prefix %q", reply, c.want)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	nc := connect(t, startServer(t, inProcess), inProcess)
	for _, cfg := range []Config{{InboxPrefix: "a.*"}, {InboxPrefix: "a."}, {InboxPrefix: "a b"}, {MaxPending: -1}} {
		if _, err := New(nc, cfg); !errors.Is(err, transport.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := New(nil, Config{}); !errors.Is(err, transport.ErrInvalidConfig) {
		t.Errorf("New(nil) = %v, want ErrInvalidConfig", err)
	}
}

func TestReservedHeadersRefused(t *testing.T) {
	nc := connect(t, startServer(t, inProcess), inProcess)
	tr := newTransport(t, nc, Config{})
	ctx := bounded(t)
	for _, k := range []string{"Status", "Description", "Nats-Msg-Id", "nats-expected-stream", TypeHeader} {
		err := tr.Publish(ctx, "x", wire.Msg{Header: map[string]string{k: "v"}})
		if !errors.Is(err, transport.ErrInvalidMsg) {
			t.Errorf("header %q: Publish = %v, want ErrInvalidMsg", k, err)
		}
	}
}

// TestRawPeers checks interop with plain nats.go peers: a responder that
// knows nothing of Formica, and a message without headers.
func TestRawPeers(t *testing.T) {
	ns := startServer(t, inProcess)
	nc := connect(t, ns, inProcess)
	tr := newTransport(t, nc, Config{})
	ctx := bounded(t)
	sub, err := nc.Subscribe("raw", func(m *nats.Msg) {
		out := nats.NewMsg(m.Reply)
		out.Header.Set(TypeHeader, "result")
		out.Header.Set("Run", m.Header.Get("Run"))
		out.Data = []byte("hi " + m.Header.Get(TypeHeader))
		_ = m.RespondMsg(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	call, err := transport.Request(ctx, tr, "raw", wire.Msg{Type: "exec", Header: map[string]string{"Run": "r9"}})
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	m, err := call.Next(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Msg{Type: "result", Header: map[string]string{"Run": "r9"}, Data: []byte("hi exec")}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("reply (-want +got):\n%s", diff)
	}
}

func TestCloseEndsCallsAndRefusesNewOnes(t *testing.T) {
	ns := startServer(t, inProcess)
	nc := connect(t, ns, inProcess)
	tr, err := New(nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	sub, err := tr.Serve("slow", "", 0, func(ctx context.Context, m wire.Msg, r transport.Replier) { <-ctx.Done() })
	if err != nil {
		t.Fatal(err)
	}
	_ = sub
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	call, err := transport.Request(ctx, tr, "slow", wire.Msg{})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { _, err := call.Next(ctx, 0); res <- err }()
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Next = %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Next did not return after Close")
	}
	if _, err := transport.Request(ctx, tr, "slow", wire.Msg{}); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Request after Close = %v, want ErrClosed", err)
	}
	if _, err := tr.Serve("x", "", 0, func(context.Context, wire.Msg, transport.Replier) {}); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Serve after Close = %v, want ErrClosed", err)
	}
}

// TestSilentOnClosedConnection: a dead connection shows up as silence.
func TestSilentOnClosedConnection(t *testing.T) {
	ns := startServer(t, inProcess)
	nc := connect(t, ns, inProcess)
	srv := newTransport(t, connect(t, ns, inProcess), Config{})
	ctx := bounded(t)
	if _, err := srv.Serve("quiet", "", 0, func(ctx context.Context, m wire.Msg, r transport.Replier) { <-ctx.Done() }); err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, nc, Config{})
	call, err := transport.Request(ctx, tr, "quiet", wire.Msg{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	_, err = call.Next(ctx, 50*time.Millisecond)
	if !errors.Is(err, transport.ErrSilent) {
		t.Errorf("Next = %v, want ErrSilent", err)
	}
}
