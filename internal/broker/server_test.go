package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// roundTrip checks a message from pub reaches a subscriber on sub. It
// publishes again until one arrives: between cluster nodes the new interest
// travels over a route asynchronously, after sub's Flush returns.
func roundTrip(t *testing.T, sub, pub *nats.Conn, subject string) {
	t.Helper()
	s, err := sub.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unsubscribe()
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := pub.Publish(subject, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		m, err := s.NextMsg(100 * time.Millisecond)
		if errors.Is(err, nats.ErrTimeout) {
			continue
		}
		if err != nil {
			t.Fatalf("receive on %s: %v", subject, err)
		}
		if got := string(m.Data); got != "hello" {
			t.Fatalf("got %q, want hello", got)
		}
		return
	}
	t.Fatalf("nothing received on %s within 10s", subject)
}

func TestInProcessOnly(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutListener(), brokertest.WithoutJetStream())
	if u := s.ClientURL(); u != "" {
		t.Fatalf("ClientURL = %q, want empty without a listener", u)
	}
	a, err := s.Connect("a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := s.Connect("b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	roundTrip(t, a, b, "formica.test")
}

func TestTCPListen(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream())
	url := s.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":-1") {
		t.Fatalf("ClientURL = %q, want nats://127.0.0.1:<port>", url)
	}
	remote, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: []string{url}, Name: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	local, err := s.Connect("local")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	roundTrip(t, remote, local, "formica.tcp")
	roundTrip(t, local, remote, "formica.tcp")
}

func TestJetStream(t *testing.T) {
	s := brokertest.Start(t)
	ctx := ctxT(t, 10*time.Second)
	if err := s.WaitJetStreamReady(ctx); err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect("js")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SUBMISSIONS", Subjects: []string{"submit.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "submit.run1", []byte("task"), jetstream.WithMsgID("run1")); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream has %d messages, want 1", info.State.Msgs)
	}
}

func TestWaitJetStreamReadyDisabled(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream(), brokertest.WithoutListener())
	if err := s.WaitJetStreamReady(ctxT(t, time.Second)); !errors.Is(err, broker.ErrJetStreamDisabled) {
		t.Fatalf("err = %v, want ErrJetStreamDisabled", err)
	}
}

func TestServerConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  broker.ServerConfig
		want string // substring of the error
	}{
		{"non-loopback listen", broker.ServerConfig{Listen: "0.0.0.0:4222"}, "not a loopback"},
		{"hostname listen", broker.ServerConfig{Listen: "example.com:4222"}, "not a loopback"},
		{"non-loopback cluster listen", broker.ServerConfig{Listen: "127.0.0.1:0",
			Cluster: &broker.ClusterConfig{Name: "c", Listen: "10.0.0.1:6222"}}, "Cluster.Listen"},
		{"jetstream without dir", broker.ServerConfig{JetStream: true}, "DataDir"},
		{"bad port", broker.ServerConfig{Listen: "127.0.0.1:http"}, "bad port"},
		{"no port", broker.ServerConfig{Listen: "127.0.0.1"}, "missing port"},
		{"token and user", broker.ServerConfig{Token: "t", User: "u", Password: "p"}, "not both"},
		{"user without password", broker.ServerConfig{User: "u"}, "go together"},
		{"cluster without listen", broker.ServerConfig{
			Cluster: &broker.ClusterConfig{Name: "c", Listen: "127.0.0.1:0"}}, "must have a Listen"},
		{"cluster without name", broker.ServerConfig{Listen: "127.0.0.1:0",
			Cluster: &broker.ClusterConfig{Listen: "127.0.0.1:0"}}, "Cluster.Name"},
		{"clustered jetstream without server name", broker.ServerConfig{Listen: "127.0.0.1:0", JetStream: true, DataDir: dir,
			Cluster: &broker.ClusterConfig{Name: "c", Listen: "127.0.0.1:0"}}, "ServerName"},
		{"bad route", broker.ServerConfig{Listen: "127.0.0.1:0",
			Cluster: &broker.ClusterConfig{Name: "c", Listen: "127.0.0.1:0", Routes: []string{"nats://nohost"}}}, "route"},
		{"negative payload", broker.ServerConfig{MaxPayload: -1}, "MaxPayload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := broker.StartServer(context.Background(), tt.cfg)
			if err == nil {
				s.Shutdown()
				t.Fatal("StartServer succeeded, want an error")
			}
			if !errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
}

func TestAllowRemote(t *testing.T) {
	// 0.0.0.0 is the one non-loopback address a test can always bind.
	s, err := broker.StartServer(ctxT(t, 10*time.Second), broker.ServerConfig{Listen: "0.0.0.0:0", AllowRemote: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("ClientURL = %q, want the wildcard reported as 127.0.0.1", s.ClientURL())
	}
}

func TestStartFailsFastOnPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	begin := time.Now()
	s, err := broker.StartServer(ctxT(t, 10*time.Second), broker.ServerConfig{Listen: l.Addr().String()})
	if err == nil {
		s.Shutdown()
		t.Fatal("StartServer on a used port succeeded")
	}
	if !errors.Is(err, broker.ErrNotReady) {
		t.Fatalf("err = %v, want ErrNotReady", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("took %s to report a used port", d)
	}
}

func TestShutdownTwice(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream())
	nc, err := s.Connect("x")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s.Shutdown()
	s.Shutdown() // and once more at cleanup
	if s.NATS().Running() {
		t.Fatal("server still running after Shutdown")
	}
}

func TestServerLogsThroughSlog(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := brokertest.Start(t, brokertest.WithLogger(log), brokertest.WithoutJetStream())
	s.Shutdown()
	out := logs.String()
	if !strings.Contains(out, "component=nats-server") || !strings.Contains(out, "Server is ready") {
		t.Fatalf("server log not routed through slog:\n%s", out)
	}
	if strings.Contains(out, "level=DEBUG") {
		t.Fatalf("debug lines logged at info level:\n%s", out)
	}
}

// TestInterestOf: the server tells a publisher whether anything in its
// account subscribes to a subject: a client, over TCP or in-process, or a
// stream capturing it.
func TestInterestOf(t *testing.T) {
	s := brokertest.Start(t)
	pub, err := s.Connect("publisher")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	interest, err := s.InterestOf(pub)
	if err != nil {
		t.Fatal(err)
	}
	const subject = "formica.events.r1.run.started"
	if interest(subject) {
		t.Fatal("interest with no subscriber")
	}
	watcher, err := nats.Connect(s.ClientURL(), nats.Name("watcher"))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	sub, err := watcher.SubscribeSync("formica.events.r1.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	if !interest(subject) {
		t.Error("no interest with a watcher of the run")
	}
	if interest("formica.events.r2.run.started") {
		t.Error("interest in another run's events")
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	if interest(subject) {
		t.Error("interest after the watcher left")
	}

	js, err := jetstream.New(pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctxT(t, 10*time.Second), jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"formica.events.>"}}); err != nil {
		t.Fatal(err)
	}
	if !interest(subject) {
		t.Error("no interest with a stream capturing the subject")
	}
}

// Monitor opens nats-server's HTTP monitoring endpoint, for the NATS
// Prometheus exporter and `nats server`; off, there is none.
func TestMonitor(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithConfig(func(c *broker.ServerConfig) { c.Monitor = "127.0.0.1:0" }))
	url := s.MonitorURL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("MonitorURL = %q", url)
	}
	resp, err := http.Get(url + "/healthz?js-enabled-only=true")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	if off := brokertest.Start(t); off.MonitorURL() != "" {
		t.Errorf("MonitorURL = %q with Monitor off", off.MonitorURL())
	}
	if _, err := broker.StartServer(context.Background(), broker.ServerConfig{Monitor: "0.0.0.0:0"}); !errors.Is(err, broker.ErrInvalidConfig) {
		t.Errorf("a remote monitor address without AllowRemote: %v, want ErrInvalidConfig", err)
	}
}
