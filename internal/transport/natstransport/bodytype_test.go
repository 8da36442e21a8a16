package natstransport

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// envelope is the start of a Formica message of type typ (wire.Encode):
// a map of three whose first entry is "t".
func envelope(typ string) []byte {
	return append(append([]byte{0x83, 0xa1, 't', 0xa0 | byte(len(typ))}, typ...), 0xa1, 'v', 0x01)
}

// TestTypeFromBody: a body that names its own type crosses without the
// type header (no header at all when it has no other) and arrives with its
// type; a body that does not keeps the header.
func TestTypeFromBody(t *testing.T) {
	ns := startServer(t, inProcess)
	nc := connect(t, ns, inProcess)
	tr := newTransport(t, nc, Config{})
	ctx := bounded(t)
	raw, err := nc.SubscribeSync("raw")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan wire.Msg, 4)
	sub, err := tr.Serve("served", "", 0, func(_ context.Context, m wire.Msg, _ transport.Replier) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		msg    wire.Msg
		header nats.Header
	}{
		{"envelope", wire.Msg{Type: "exec.result", Data: envelope("exec.result")}, nil},
		{"envelope with ids", wire.Msg{Type: "exec.request", Header: map[string]string{"Run": "r1"}, Data: envelope("exec.request")},
			nats.Header{"Run": {"r1"}}},
		{"type differs from body", wire.Msg{Type: "other", Data: envelope("exec.result")}, nats.Header{TypeHeader: {"other"}}},
		{"text body", wire.Msg{Type: string(wire.TypeError), Data: []byte("boom")}, nats.Header{TypeHeader: {string(wire.TypeError)}}},
	}
	for _, c := range cases {
		if err := tr.Publish(ctx, "raw", c.msg); err != nil {
			t.Fatal(err)
		}
		m, err := raw.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.header, m.Header); diff != "" {
			t.Errorf("%s: header on the wire (-want +got):\n%s", c.name, diff)
		}
		if err := tr.Publish(ctx, "served", c.msg); err != nil {
			t.Fatal(err)
		}
		select {
		case in := <-got:
			in.Subject = ""
			if diff := cmp.Diff(c.msg, in); diff != "" {
				t.Errorf("%s: received (-want +got):\n%s", c.name, diff)
			}
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}
