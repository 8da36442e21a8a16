package worker

import (
	"context"
	"errors"
	"sync"
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

// TestStandstillConfirmsPlacement: a tool call asks the coordinator nothing
// while the process runs without a standstill; after one, the next tool
// call of each placement waits for the coordinator to confirm it (once,
// or again when the answer is late), and a fenced answer, or none from a
// coordinator gone silent, refuses the call and stops the thread.
func TestStandstillConfirmsPlacement(t *testing.T) {
	ctx := context.Background()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
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
	wnc, err := srv.Connect("worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	// Long enough that a loaded machine does not stand still by itself.
	const interval = time.Second
	w, err := New(Config{ID: "w1", Conn: wnc, Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })

	// The coordinator's side of the checks: it records each and gives the
	// next of the answers it is told (ok, fenced, or none), ok when there
	// is none left.
	var (
		mu      sync.Mutex
		checks  []wire.PlacementCheck
		answers []string
	)
	sub, err := coord.Serve(wire.SubjectPlacement("c1", wire.AnyWorker), "", 0, func(_ context.Context, m wire.Msg, r transport.Replier) {
		var pc wire.PlacementCheck
		if err := wire.DecodeAs(m.Data, wire.TypePlacementCheck, &pc); err != nil {
			t.Errorf("check: %v", err)
			return
		}
		mu.Lock()
		checks = append(checks, pc)
		a := "ok"
		if len(answers) > 0 {
			a, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		switch a {
		case "ok":
			r.Reply(wire.Message(wire.TypeOK, struct{}{}))
		case "fenced":
			r.Reply(wire.ErrorReply(&wire.Error{Code: wire.CodeFenced, Message: "placed elsewhere"}))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Stop() })
	coord.Flush(ctx)
	checked := func() []wire.PlacementCheck {
		mu.Lock()
		defer mu.Unlock()
		return append([]wire.PlacementCheck(nil), checks...)
	}
	answerWith := func(a ...string) {
		mu.Lock()
		answers = a
		mu.Unlock()
	}

	// Heartbeats keep the lease fresh, so only the check can refuse a call.
	up := time.Minute
	stopBeat, beat := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(beat)
		tk := time.NewTicker(interval / 2)
		defer tk.Stop()
		for start := time.Now(); ; {
			m := wire.Message(wire.TypeCoordHeartbeat, wire.CoordHeartbeat{ID: "c1", Epoch: "e1", Interval: interval, Uptime: up + time.Since(start)})
			coord.Publish(ctx, wire.SubjectCoordHeartbeats, m)
			select {
			case <-stopBeat:
				return
			case <-tk.C:
			}
		}
	}()
	stopBeats := sync.OnceFunc(func() { close(stopBeat); <-beat })
	defer stopBeats()

	// Two slow threads placed on the worker.
	calls := map[string]transport.Call{}
	threads := map[string]*thread.Thread{}
	for _, id := range []string{"t1", "t2"} {
		a := spec.Agent{Name: "slow", Model: providers.Sim, ModelArgs: model.Args{"latency_ms": 60_000}}
		th := thread.Thread{RunID: "r1", ID: id, Path: "root", Name: "slow", Task: "wait", Agent: a, Cwd: t.TempDir()}
		req := wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 1, Token: "tok-" + id, Uptime: up}
		call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(call.Close)
		if m, err := call.Next(ctx, 10*time.Second); err != nil || m.Type != string(wire.TypeExecAccepted) {
			t.Fatalf("placing %s: %v %s", id, err, m.Type)
		}
		calls[id], threads[id] = call, &th
	}
	standStill := func() {
		w.mu.Lock()
		w.alive = w.alive.Add(-time.Hour)
		w.mu.Unlock()
	}

	for range 3 {
		if err := w.guard(ctx, threads["t1"]); err != nil {
			t.Fatalf("tool call without a standstill: %v", err)
		}
	}
	if c := checked(); len(c) != 0 {
		t.Fatalf("checks without a standstill: %+v", c)
	}

	standStill()
	for range 2 {
		if err := w.guard(ctx, threads["t1"]); err != nil {
			t.Fatalf("tool call of a confirmed placement: %v", err)
		}
	}
	if c := checked(); len(c) != 1 || c[0] != (wire.PlacementCheck{RunID: "r1", ThreadID: "t1", Token: "tok-t1"}) {
		t.Fatalf("checks after a standstill: %+v, want one for t1 with its token", c)
	}

	standStill()
	answerWith("fenced")
	if err := w.guard(ctx, threads["t1"]); !errors.Is(err, errLapsed) {
		t.Errorf("tool call of a fenced placement: %v", err)
	}
	// No answer while the coordinator is heard from: asked again.
	answerWith("none", "ok")
	if err := w.guard(ctx, threads["t2"]); err != nil {
		t.Errorf("tool call confirmed on the second check: %v", err)
	}
	if c := checked(); len(c) != 4 {
		t.Errorf("%d checks, want 4", len(c))
	}
	// No answer from a coordinator gone silent: refused.
	standStill()
	answerWith("none")
	stopBeats()
	if err := w.guard(ctx, threads["t2"]); !errors.Is(err, errLapsed) {
		t.Errorf("tool call with no answer from a silent coordinator: %v", err)
	}
	for id, call := range calls {
		if er := awaitResult(t, ctx, call, 10*time.Second); er.Result.Status != event.Cancelled {
			t.Errorf("%s ended %s (%s), want cancelled", id, er.Result.Status, er.Result.Error)
		}
	}
}
