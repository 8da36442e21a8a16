package transporttest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// replies collects what a RequestFunc's function is given, and fails the
// test if two calls of it overlap.
type replies struct {
	in   atomic.Int32
	got  chan wire.Msg
	errs chan error
	t    *testing.T
}

func newReplies(t *testing.T) *replies {
	return &replies{got: make(chan wire.Msg, 64), errs: make(chan error, 8), t: t}
}

func (r *replies) f(m wire.Msg, err error) {
	if r.in.Add(1) != 1 {
		r.t.Error("RequestFunc's function called while it was running")
	}
	defer r.in.Add(-1)
	if err != nil {
		r.errs <- err
		return
	}
	r.got <- m
}

func requestFunc(t *testing.T, ctx context.Context, tr transport.Transport, subj string, m wire.Msg, f func(wire.Msg, error)) func() {
	t.Helper()
	stop, err := tr.RequestFunc(ctx, subj, m, f)
	if err != nil {
		t.Fatalf("RequestFunc: %v", err)
	}
	t.Cleanup(stop)
	return stop
}

// testRequestFunc: every reply reaches the function, in order, one at a
// time; after stop, nothing more does.
func testRequestFunc(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	more, lateSent := make(chan struct{}), make(chan struct{})
	serve(t, ctx, server, subj, 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		for range 40 {
			_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
		}
		_ = r.Reply(wire.Msg{Type: "result", Data: append([]byte("done:"), m.Data...)})
		select {
		case <-more:
		case <-ctx.Done():
		}
		_ = r.Reply(wire.Msg{Type: "late"})
		close(lateSent)
	})
	rs := newReplies(t)
	stop := requestFunc(t, ctx, client, subj, wire.Msg{Type: "exec", Data: []byte("task")}, rs.f)
	var got []wire.Msg
	for len(got) < 41 {
		got = append(got, recv(t, rs.got, "a reply"))
	}
	want := make([]wire.Msg, 40, 41)
	for i := range want {
		want[i] = wire.Msg{Type: string(wire.TypeProgress)}
	}
	want = append(want, wire.Msg{Type: "result", Data: []byte("done:task")})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	stop()
	stop()
	close(more)
	// Once both flushes are through, the late reply has reached the
	// client, which had to drop it.
	recv(t, lateSent, "the late reply to be sent")
	if err := server.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-rs.got:
		t.Errorf("after stop the function got %+v", m)
	case err := <-rs.errs:
		t.Errorf("after stop the function got %v", err)
	default:
	}
}

// testRequestFuncNoResponders: nobody listens, so the function's last word
// is ErrNoResponders, once.
func testRequestFuncNoResponders(t *testing.T, newPair NewPair) {
	client, _ := newPair(t, Limits{})
	ctx := bounded(t)
	rs := newReplies(t)
	requestFunc(t, ctx, client, subject(t), wire.Msg{Type: "exec"}, rs.f)
	if err := recv(t, rs.errs, "no responders"); !errors.Is(err, transport.ErrNoResponders) {
		t.Fatalf("got %v, want ErrNoResponders", err)
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-rs.errs:
		t.Errorf("a second error: %v", err)
	case m := <-rs.got:
		t.Errorf("a reply after no responders: %+v", m)
	default:
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := client.RequestFunc(cctx, subject(t), wire.Msg{Type: "exec"}, rs.f); !errors.Is(err, context.Canceled) {
		t.Errorf("RequestFunc with a cancelled ctx = %v, want context.Canceled", err)
	}
}
