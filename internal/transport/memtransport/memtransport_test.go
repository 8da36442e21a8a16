package memtransport

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/transporttest"
	"github.com/formica-run/formica/internal/wire"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, l transporttest.Limits) (client, server transport.Transport) {
		n := NewNetwork()
		cfg := Config{MaxPending: l.MaxPending, StopTimeout: 5 * time.Second}
		return newTransport(t, n, cfg), newTransport(t, n, cfg)
	})
}

func newTransport(t *testing.T, n *Network, cfg Config) *Transport {
	tr := n.Transport(cfg)
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tr
}

// serve registers h on tr and fails the test if it cannot.
func serve(t *testing.T, tr *Transport, subject, queue string, h transport.Handler) transport.Subscription {
	t.Helper()
	sub, err := tr.Serve(subject, queue, 0, h)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return sub
}

// TestSilentOnFakeClock: a worker that never answers is presumed lost
// after the idle window, which passes at once on the bubble's clock.
func TestSilentOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork()
		client, server := newTransport(t, n, Config{}), newTransport(t, n, Config{})
		serve(t, server, "worker.exec", "", func(ctx context.Context, m wire.Msg, r transport.Replier) { <-ctx.Done() })
		call, err := transport.Request(t.Context(), client, "worker.exec", wire.Msg{Type: "exec"})
		if err != nil {
			t.Fatal(err)
		}
		defer call.Close()
		start := time.Now()
		if _, err := call.Next(t.Context(), 5*time.Second); !errors.Is(err, transport.ErrSilent) {
			t.Fatalf("Next = %v, want ErrSilent", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("silent after %v, want 5s", d)
		}
	})
}

// TestDrop: a dropped request reads as a lost peer, a dropped reply is
// missing from what the caller reads, a dropped publish never arrives.
func TestDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		n := NewNetwork()
		client, server := newTransport(t, n, Config{}), newTransport(t, n, Config{})
		serve(t, server, "worker.exec", "", func(ctx context.Context, m wire.Msg, r transport.Replier) {
			_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
			_ = r.Reply(wire.Msg{Type: "result"})
		})
		events := make(chan wire.Msg, 1)
		serve(t, server, "events", "", func(ctx context.Context, m wire.Msg, r transport.Replier) { events <- m })

		next := func(call transport.Call) string {
			m, err := call.Next(ctx, 5*time.Second)
			if errors.Is(err, transport.ErrSilent) {
				return "silent"
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			return m.Type
		}
		ask := func() []string {
			call, err := transport.Request(ctx, client, "worker.exec", wire.Msg{Type: "exec"})
			if err != nil {
				t.Fatal(err)
			}
			defer call.Close()
			var got []string
			for len(got) < 2 {
				got = append(got, next(call))
			}
			return got
		}
		const silent = "silent"

		n.SetDrop(func(subject string, m wire.Msg) bool { return subject == "worker.exec" })
		if diff := cmp.Diff([]string{silent, silent}, ask()); diff != "" {
			t.Errorf("request dropped (-want +got):\n%s", diff)
		}
		n.SetDrop(func(subject string, m wire.Msg) bool { return m.Type == "result" })
		if diff := cmp.Diff([]string{"progress", silent}, ask()); diff != "" {
			t.Errorf("result dropped (-want +got):\n%s", diff)
		}
		n.SetDrop(nil)
		if diff := cmp.Diff([]string{"progress", "result"}, ask()); diff != "" {
			t.Errorf("nothing dropped (-want +got):\n%s", diff)
		}

		n.SetDrop(func(subject string, m wire.Msg) bool { return subject == "events" })
		if err := client.Publish(ctx, "events", wire.Msg{Type: "lost"}); err != nil {
			t.Fatal(err)
		}
		n.SetDrop(nil)
		if err := client.Publish(ctx, "events", wire.Msg{Type: "kept"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if m := <-events; m.Type != "kept" {
			t.Errorf("got %q, want only the publish sent without drop", m.Type)
		}
	})
}

// TestFanOut: every plain subscriber gets a message, a queue group one
// member, and wildcards match as NATS's do.
func TestFanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		n := NewNetwork()
		client, server := newTransport(t, n, Config{}), newTransport(t, n, Config{})
		got := make(chan string, 100)
		for _, s := range []struct{ name, subject, queue string }{
			{"exact", "hb.w1", ""},
			{"star", "hb.*", ""},
			{"rest", "hb.>", ""},
			{"q1", "hb.*", "q"},
			{"q2", "hb.w1", "q"},
			{"other", "hb.w2", ""},
			{"deeper", "hb.*.x", ""},
		} {
			serve(t, server, s.subject, s.queue, func(ctx context.Context, m wire.Msg, r transport.Replier) {
				got <- s.name + " " + m.Subject
			})
		}
		const sends = 10
		for range sends {
			if err := client.Publish(ctx, "hb.w1", wire.Msg{}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		count := map[string]int{}
		for len(got) > 0 {
			count[<-got]++
		}
		if q := count["q1 hb.w1"] + count["q2 hb.w1"]; q != sends || count["q1 hb.w1"] == 0 || count["q2 hb.w1"] == 0 {
			t.Errorf("queue group got %d and %d of %d, want all, shared", count["q1 hb.w1"], count["q2 hb.w1"], sends)
		}
		delete(count, "q1 hb.w1")
		delete(count, "q2 hb.w1")
		want := map[string]int{"exact hb.w1": sends, "star hb.w1": sends, "rest hb.w1": sends}
		if diff := cmp.Diff(want, count); diff != "" {
			t.Errorf("deliveries (-want +got):\n%s", diff)
		}
	})
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.b", "a.b.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a", false},
		{"a.*", "a.b.c", false},
		{"*.b", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
	} {
		if got := match(c.pattern, c.subject); got != c.want {
			t.Errorf("match(%q, %q) = %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
}

// TestCopies: a receiver never sees the sender change what it sent.
func TestCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork()
		client, server := newTransport(t, n, Config{}), newTransport(t, n, Config{})
		got := make(chan wire.Msg, 1)
		serve(t, server, "s", "", func(ctx context.Context, m wire.Msg, r transport.Replier) { got <- m })
		m := wire.Msg{Type: "t", Header: map[string]string{"K": "v"}, Data: []byte("abc")}
		if err := client.Publish(t.Context(), "s", m); err != nil {
			t.Fatal(err)
		}
		m.Header["K"] = "changed"
		m.Data[0] = 'X'
		want := wire.Msg{Subject: "s", Type: "t", Header: map[string]string{"K": "v"}, Data: []byte("abc")}
		if diff := cmp.Diff(want, <-got); diff != "" {
			t.Errorf("received (-want +got):\n%s", diff)
		}
	})
}

// TestClose: closing a transport ends its calls and subscriptions, and it
// sends nothing more.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		n := NewNetwork()
		client, server := n.Transport(Config{}), newTransport(t, n, Config{})
		serve(t, server, "slow", "", func(ctx context.Context, m wire.Msg, r transport.Replier) { <-ctx.Done() })
		call, err := transport.Request(ctx, client, "slow", wire.Msg{})
		if err != nil {
			t.Fatal(err)
		}
		last := make(chan error, 1)
		if _, err := client.RequestFunc(ctx, "slow", wire.Msg{}, func(m wire.Msg, err error) { last <- err }); err != nil {
			t.Fatal(err)
		}
		handled := make(chan struct{})
		if _, err := client.Serve("mine", "", 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
			<-ctx.Done()
			close(handled)
		}); err != nil {
			t.Fatal(err)
		}
		if err := server.Publish(ctx, "mine", wire.Msg{}); err != nil {
			t.Fatal(err)
		}
		next := make(chan error, 1)
		go func() { _, err := call.Next(ctx, 0); next <- err }()
		synctest.Wait()

		if err := client.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := client.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		<-handled
		if err := <-next; !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Next = %v, want ErrClosed", err)
		}
		if err := <-last; !errors.Is(err, transport.ErrClosed) {
			t.Errorf("RequestFunc's last word = %v, want ErrClosed", err)
		}
		if _, err := transport.Request(ctx, client, "slow", wire.Msg{}); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Request after Close = %v, want ErrClosed", err)
		}
		if err := client.Publish(ctx, "slow", wire.Msg{}); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Publish after Close = %v, want ErrClosed", err)
		}
		if _, err := client.Serve("x", "", 0, func(context.Context, wire.Msg, transport.Replier) {}); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Serve after Close = %v, want ErrClosed", err)
		}
		// Its subscription is gone from the network.
		call, err = transport.Request(ctx, server, "mine", wire.Msg{})
		if err != nil {
			t.Fatal(err)
		}
		defer call.Close()
		if _, err := call.Next(ctx, time.Second); !errors.Is(err, transport.ErrNoResponders) {
			t.Errorf("request to the closed transport's subject = %v, want ErrNoResponders", err)
		}
	})
}
