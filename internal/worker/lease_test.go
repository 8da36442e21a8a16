package worker

import (
	"context"
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

// TestLeaseIgnoresHeartbeatsReadLate: heartbeats that sat in the socket
// while the worker was frozen do not renew the lease, since their send time
// is placed on this worker's clock by the earliest arrival seen.
func TestLeaseIgnoresHeartbeatsReadLate(t *testing.T) {
	t0 := time.Now()
	var c coordSeen
	// Heartbeats at coordinator ages 10s, 11s, 12s, read as they were sent.
	for i := range 3 {
		c.see("e1", time.Duration(10+i)*time.Second, time.Second, t0.Add(time.Duration(i)*time.Second))
	}
	if !c.fresh(t0.Add(3 * time.Second)) {
		t.Fatal("lease lapsed one interval after a heartbeat")
	}
	// Frozen from t0+2s to t0+10s: the heartbeat sent at age 13s is read at t0+10s.
	woke := t0.Add(10 * time.Second)
	c.see("e1", 13*time.Second, time.Second, woke)
	if c.fresh(woke) {
		t.Error("a heartbeat sent 7s ago, read late, renewed the lease")
	}
	// One sent just now does renew it.
	c.see("e1", 20*time.Second, time.Second, woke.Add(time.Millisecond))
	if !c.fresh(woke.Add(time.Millisecond)) {
		t.Error("a fresh heartbeat did not renew the lease")
	}
	// A new epoch (the coordinator restarted) starts over.
	c.see("e2", 50*time.Millisecond, time.Second, woke.Add(2*time.Millisecond))
	if c.epoch != "e2" || !c.fresh(woke.Add(3*time.Millisecond)) {
		t.Errorf("after a restart: epoch %q fresh %v", c.epoch, c.fresh(woke.Add(3*time.Millisecond)))
	}
}

// TestFencedHeartbeatCancelsThread: a coordinator heartbeat naming a
// placement as superseded stops that thread at once; one naming an older
// attempt does not.
func TestFencedHeartbeatCancelsThread(t *testing.T) {
	ctx := context.Background()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	conn := func(name string) *natstransport.Transport {
		nc, err := srv.Connect(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		tr, err := natstransport.New(nc, natstransport.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	wnc, err := srv.Connect("worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	w, err := New(Config{ID: "w1", Conn: wnc, Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })
	coord := conn("coordinator")

	hb := func(f ...wire.Fenced) {
		m := wire.Message(wire.TypeCoordHeartbeat, wire.CoordHeartbeat{ID: "c1", Epoch: "e1", Interval: 100 * time.Millisecond, Uptime: time.Minute, Fenced: f})
		if err := coord.Publish(ctx, wire.SubjectCoordHeartbeats, m); err != nil {
			t.Fatal(err)
		}
	}
	stopBeat := make(chan struct{})
	beat := make(chan struct{})
	go func() { // keep the lease fresh, so only the fence can stop the thread
		defer close(beat)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-tk.C:
				hb()
			}
		}
	}()
	defer func() { close(stopBeat); <-beat }()

	a := spec.Agent{Name: "slow", Model: providers.Sim, ModelArgs: model.Args{"latency_ms": 30_000}}
	th := thread.Thread{RunID: "r1", ID: "t1", Path: "root", Name: "slow", Task: "wait", Agent: a, Cwd: t.TempDir()}
	req := wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 2, Token: "tok", Uptime: time.Minute}
	call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	next := func() wire.Msg {
		t.Helper()
		m, err := call.Next(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := next(); m.Type != string(wire.TypeExecAccepted) {
		t.Fatalf("first reply %s", m.Type)
	}
	hb(wire.Fenced{Worker: "w1", ThreadID: "t1", Attempt: 1}) // an older placement: no effect
	hb(wire.Fenced{Worker: "w2", ThreadID: "t1", Attempt: 2}) // another worker's: no effect
	for range 3 {
		if m := next(); m.Type != string(wire.TypeProgress) {
			t.Fatalf("thread ended after fences of other placements: %s", m.Type)
		}
	}
	hb(wire.Fenced{Worker: "w1", ThreadID: "t1", Attempt: 2})
	for {
		m := next()
		if m.Type != string(wire.TypeExecResult) {
			continue
		}
		var er wire.ExecResult
		if err := wire.DecodeAs(m.Data, wire.TypeExecResult, &er); err != nil {
			t.Fatal(err)
		}
		if er.Result.Status != event.Cancelled || er.Token != "tok" {
			t.Errorf("result %+v, want cancelled with the placement's token", er)
		}
		return
	}
}
