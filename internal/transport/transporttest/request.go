package transporttest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

func testProgressThenFinal(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	serve(t, ctx, server, subj, 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		for range 3 {
			_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
		}
		_ = r.Reply(wire.Msg{Type: "result", Header: map[string]string{"Run": m.Header["Run"]}, Data: append([]byte("done:"), m.Data...)})
	})
	call := request(t, ctx, client, subj, wire.Msg{Type: "exec", Header: map[string]string{"Run": "r1"}, Data: []byte("task")})
	var got []wire.Msg
	for len(got) < 4 {
		m, err := call.Next(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("Next after %d replies: %v", len(got), err)
		}
		got = append(got, m)
	}
	p := wire.Msg{Type: string(wire.TypeProgress)}
	want := []wire.Msg{p, p, p, {Type: "result", Header: map[string]string{"Run": "r1"}, Data: []byte("done:task")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
}

// testConcurrentCalls puts 1000 requests in flight on one transport before
// reading any, then reads them from 1000 goroutines: every reply must reach
// its own call.
func testConcurrentCalls(t *testing.T, newPair NewPair) {
	const n = 1000
	client, server := newPair(t, Limits{MaxPending: n}) // 64 at a time, the rest queued
	ctx := bounded(t)
	subj := subject(t)
	serve(t, ctx, server, subj, 64, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
		_ = r.Reply(wire.Msg{Type: "echo", Header: map[string]string{"Seq": m.Header["Seq"]}, Data: m.Data})
	})
	calls := make([]transport.Call, n)
	for i := range calls {
		seq := strconv.Itoa(i)
		calls[i] = request(t, ctx, client, subj, wire.Msg{Type: "ask", Header: map[string]string{"Seq": seq}, Data: []byte("body-" + seq)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, call := range calls {
		wg.Go(func() {
			for {
				m, err := call.Next(ctx, 5*time.Second)
				if err != nil {
					errs <- fmt.Errorf("call %d: %w", i, err)
					return
				}
				if m.Type == string(wire.TypeProgress) {
					continue
				}
				if seq := strconv.Itoa(i); m.Header["Seq"] != seq || string(m.Data) != "body-"+seq {
					errs <- fmt.Errorf("call %d got reply for %s (%q)", i, m.Header["Seq"], m.Data)
				}
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testNoResponders(t *testing.T, newPair NewPair) {
	client, _ := newPair(t, Limits{})
	ctx := bounded(t)
	start := time.Now()
	call := request(t, ctx, client, subject(t), wire.Msg{Type: "exec"})
	_, err := call.Next(ctx, 5*time.Second)
	if !errors.Is(err, transport.ErrNoResponders) {
		t.Fatalf("Next = %v, want ErrNoResponders", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("no responders took %v; want it at once, not after the idle window", d)
	}
	if _, err := call.Next(ctx, 100*time.Millisecond); !errors.Is(err, transport.ErrNoResponders) {
		t.Errorf("second Next = %v, want ErrNoResponders again", err)
	}
}

func testSilent(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	serve(t, ctx, server, subj, 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
		<-ctx.Done() // then goes quiet, like a lost worker
	})
	call := request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	if m, err := call.Next(ctx, 5*time.Second); err != nil || m.Type != string(wire.TypeProgress) {
		t.Fatalf("first Next = %+v, %v; want progress", m, err)
	}
	const idle = 100 * time.Millisecond
	start := time.Now()
	_, err := call.Next(ctx, idle)
	if !errors.Is(err, transport.ErrSilent) {
		t.Fatalf("Next = %v, want ErrSilent", err)
	}
	if d := time.Since(start); d < idle || d > 2*time.Second {
		t.Errorf("ErrSilent after %v, want about %v", d, idle)
	}
	// A cancelled ctx wins over the idle window.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := call.Next(cctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with cancelled ctx = %v, want context.Canceled", err)
	}
}

func testCallClose(t *testing.T, newPair NewPair) {
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	serve(t, ctx, server, subj, 0, func(ctx context.Context, m wire.Msg, r transport.Replier) { <-ctx.Done() })
	call := request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	res := make(chan error, 1)
	go func() {
		_, err := call.Next(ctx, 0)
		res <- err
	}()
	time.Sleep(20 * time.Millisecond) // let Next block; the test holds either way
	call.Close()
	call.Close()
	if err := recv(t, res, "Next to return after Close"); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("blocked Next = %v, want ErrClosed", err)
	}
	if _, err := call.Next(ctx, time.Second); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
}

// testFinalNeverDropped floods a small reply buffer with progress while the
// caller is not reading; the non-progress replies must all arrive, in order.
func testFinalNeverDropped(t *testing.T, newPair NewPair) {
	const flood = 5000
	client, server := newPair(t, Limits{})
	ctx := bounded(t)
	subj := subject(t)
	sent := make(chan struct{})
	serve(t, ctx, server, subj, 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		for range flood {
			_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
		}
		_ = r.Reply(wire.Msg{Type: "partial", Data: []byte("a")})
		for range flood {
			_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
		}
		_ = r.Reply(wire.Msg{Type: "final", Data: []byte("b")})
		close(sent)
	})
	call := request(t, ctx, client, subj, wire.Msg{Type: "exec"})
	recv(t, sent, "the flood to be sent")
	if err := server.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	progress := 0
	for len(got) < 2 {
		m, err := call.Next(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("Next after %v and %d progress: %v", got, progress, err)
		}
		if m.Type == string(wire.TypeProgress) {
			progress++
			continue
		}
		got = append(got, m.Type+":"+string(m.Data))
	}
	if diff := cmp.Diff([]string{"partial:a", "final:b"}, got); diff != "" {
		t.Errorf("non-progress replies (-want +got):\n%s", diff)
	}
	t.Logf("%d of %d progress messages delivered", progress, 2*flood)
}
