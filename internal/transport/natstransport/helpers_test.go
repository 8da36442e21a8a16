package natstransport

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/transporttest"
)

// link is how a test reaches the embedded server.
type link int

const (
	tcp link = iota
	inProcess
)

func (l link) String() string { return [...]string{"TCP", "InProcess"}[l] }

// startServer runs an embedded NATS server on a random port (or no port
// for in-process use) until the test ends.
func startServer(tb testing.TB, l link) *server.Server {
	tb.Helper()
	ns, err := server.NewServer(&server.Options{Port: -1, NoSigs: true, NoLog: true, DontListen: l == inProcess})
	if err != nil {
		tb.Fatalf("nats server: %v", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats server not ready")
	}
	tb.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

func connect(tb testing.TB, ns *server.Server, l link, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	url := ns.ClientURL()
	if l == inProcess {
		url, opts = "", append(opts, nats.InProcessServer(ns))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

func newTransport(tb testing.TB, nc *nats.Conn, cfg Config) *Transport {
	tb.Helper()
	tr, err := New(nc, cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		if err := tr.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return tr
}

// pair is the suite's factory: client and server on separate connections,
// as in production where they are separate processes.
func pair(l link) transporttest.NewPair {
	return func(t *testing.T, lim transporttest.Limits) (client, srv transport.Transport) {
		ns := startServer(t, l)
		cfg := Config{MaxPending: lim.MaxPending, StopTimeout: 5 * time.Second}
		return newTransport(t, connect(t, ns, l), cfg), newTransport(t, connect(t, ns, l), cfg)
	}
}
