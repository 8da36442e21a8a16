package worker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// reaskBeat is the heartbeat of the worker and coordinator of reaskStack.
const reaskBeat = 100 * time.Millisecond

// reaskStack starts a server, worker w1 on a connection that reconnects at
// once, and a connection for the test standing in for coordinator c1,
// which heartbeats until the test ends, so the worker waits on it patiently.
func reaskStack(t *testing.T) (wnc, cnc *nats.Conn, coord *natstransport.Transport) {
	t.Helper()
	ctx := context.Background()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	wnc, err = srv.Connect("worker", nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	w, err := New(Config{ID: "w1", Conn: wnc, Slots: 4, Models: runner.ModelOpenerFunc(providers.Open),
		HeartbeatInterval: reaskBeat, AllowScripted: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })
	cnc, err = srv.Connect("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	coord, err = natstransport.New(cnc, natstransport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close() })
	stop, stopped := make(chan struct{}), make(chan struct{})
	born := time.Now().Add(-time.Minute)
	go func() {
		defer close(stopped)
		tk := time.NewTicker(reaskBeat / 2)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				m := wire.Message(wire.TypeCoordHeartbeat, wire.CoordHeartbeat{ID: "c1", Epoch: "e1", Interval: reaskBeat, Uptime: time.Since(born)})
				coord.Publish(ctx, wire.SubjectCoordHeartbeats, m)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-stopped })
	return wnc, cnc, coord
}
