package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// startWorker starts worker w1 on a fresh embedded server and returns it
// with a transport standing in for its coordinator.
func startWorker(t testing.TB) (*Worker, *natstransport.Transport) {
	t.Helper()
	ctx := context.Background()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	wnc, err := srv.Connect("worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	w, err := New(Config{ID: "w1", Conn: wnc, Slots: 64, Models: runner.ModelOpenerFunc(providers.Open)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })
	cnc, err := srv.Connect("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	coord, err := natstransport.New(cnc, natstransport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close() })
	return w, coord
}

// execRequest places thread id, whose model takes latency per call.
func execRequest(t testing.TB, id string, latency time.Duration) wire.ExecRequest {
	return execIn(t.TempDir(), id, latency)
}

func execIn(cwd, id string, latency time.Duration) wire.ExecRequest {
	a := spec.Agent{Name: "h", Model: providers.Sim, ModelArgs: model.Args{"latency_ms": latency.Milliseconds()}}
	th := thread.Thread{RunID: "r1", ID: id, Path: "root", Name: "h", Task: "answer", Agent: a, Cwd: cwd}
	return wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 1, Token: "tok-" + id, Uptime: time.Minute}
}

// BenchmarkHandOff is one placed thread on a worker, from the coordinator's
// side: the ExecRequest sent, decoded and admitted, the thread hosted and
// started, its one model turn (sim, no latency), its result back. The
// allocations are the worker's hand-off and the thread's, plus two NATS
// round trips of the requester.
func BenchmarkHandOff(b *testing.B) {
	_, coord := startWorker(b)
	ctx := context.Background()
	cwd := b.TempDir()
	msgs := make([]wire.Msg, b.N)
	for i := range msgs {
		msgs[i] = wire.Message(wire.TypeExecRequest, execIn(cwd, fmt.Sprintf("t%d", i), 0))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), msgs[i])
		if err != nil {
			b.Fatal(err)
		}
		for {
			m, err := call.Next(ctx, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if m.Type == string(wire.TypeExecResult) {
				break
			}
		}
		call.Close()
	}
}

// TestCancelRightAfterAcceptedIsNotLost: a cancel sent the moment the
// worker says it took a thread reaches the thread, however early in its
// start it arrives; the thread ends cancelled with the cancel's reason.
func TestCancelRightAfterAcceptedIsNotLost(t *testing.T) {
	_, coord := startWorker(t)
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	for i := range 50 {
		id := fmt.Sprintf("t%d", i)
		call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, execRequest(t, id, time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		m, err := call.Next(ctx, 10*time.Second)
		if err != nil || m.Type != string(wire.TypeExecAccepted) {
			t.Fatalf("first reply %s, %v; want accepted", m.Type, err)
		}
		cn := wire.Cancel{RunID: "r1", ThreadIDs: []string{id}, Reason: "stop now"}
		if err := coord.Publish(ctx, wire.SubjectCancel("w1"), wire.Message(wire.TypeCancel, cn)); err != nil {
			t.Fatal(err)
		}
		if er := awaitResult(t, ctx, call, 10*time.Second); er.Result.Status != event.Cancelled || !strings.Contains(er.Result.Error, "stop now") {
			t.Fatalf("thread %s ended %+v, want cancelled: stop now", id, er.Result)
		}
		call.Close()
	}
}
