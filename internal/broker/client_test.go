package broker_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

func TestClientConfigErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  broker.ClientConfig
		want string
	}{
		{"creds and token", broker.ClientConfig{Creds: file, Token: "t"}, "Creds and Token"},
		{"nkey and user", broker.ClientConfig{NKeySeedFile: file, User: "u", Password: "p"}, "NKeySeedFile and User"},
		{"token and user", broker.ClientConfig{Token: "t", User: "u"}, "Token and User"},
		{"password without user", broker.ClientConfig{Password: "p"}, "Password without User"},
		{"cert without key", broker.ClientConfig{CertFile: file}, "CertFile and KeyFile"},
		{"key without cert", broker.ClientConfig{KeyFile: file}, "CertFile and KeyFile"},
		{"missing creds file", broker.ClientConfig{Creds: file + ".nope"}, "Creds"},
		{"missing CA file", broker.ClientConfig{CAFile: file + ".nope"}, "CAFile"},
		{"CA file without PEM", broker.ClientConfig{CAFile: file}, "no PEM"},
		{"bad nkey seed", broker.ClientConfig{NKeySeedFile: file}, "NKeySeedFile"},
		{"wildcard inbox prefix", broker.ClientConfig{InboxPrefix: "_INBOX.>"}, "InboxPrefix"},
		{"negative timeout", broker.ClientConfig{Timeout: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := broker.Connect(ctxT(t, 5*time.Second), tt.cfg)
			if err == nil {
				nc.Close()
				t.Fatal("Connect succeeded, want a config error")
			}
			if !errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
}

func TestConnectURLList(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream())
	// A dead first entry and a comma-separated element: the live one is found.
	cfg := broker.ClientConfig{URLs: []string{"nats://127.0.0.1:1," + s.ClientURL()}, Timeout: time.Second}
	nc, err := broker.Connect(ctxT(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got, want := len(nc.Servers()), 2; got < want {
		t.Fatalf("server pool has %d entries, want at least %d", got, want)
	}
}

func TestConnectHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := broker.Connect(ctx, broker.ClientConfig{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestConnectRedactsPassword(t *testing.T) {
	_, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{
		URLs: []string{"nats://bob:hunter2@127.0.0.1:1"}, Timeout: 200 * time.Millisecond,
	})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v, want a dial error without the password", err)
	}
}

// syncBuffer is a log sink safe for the client's callback goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAsyncErrorsAreLogged(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream())
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	nc, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: []string{s.ClientURL()}, Name: "slow", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	release := make(chan struct{})
	defer close(release)
	sub, err := nc.Subscribe("formica.slow", func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(1, 1024); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := nc.Publish("formica.slow", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "slow consumer") {
		if time.Now().After(deadline) {
			t.Fatalf("no slow consumer logged; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "subject=formica.slow") {
		t.Fatalf("log lacks the subject:\n%s", logs.String())
	}
}

func TestRegisterFlags(t *testing.T) {
	var c broker.ClientConfig
	var s broker.ServerConfig
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	s.RegisterServerFlags(fs)
	err := fs.Parse([]string{
		"--nats", "nats://a:4222,nats://b:4222", "--nats", "nats://c:4222",
		"--nats-creds", "x.creds", "--nats-ca", "ca.pem", "--nats-cert", "c.pem", "--nats-key", "k.pem",
		"--data-dir", "/var/lib/formica", "--nats-listen", "0.0.0.0:4222", "--nats-allow-remote",
		"--nats-server-name", "n1", "--nats-cluster-name", "formica", "--nats-cluster-listen", "0.0.0.0:6222",
		"--nats-routes", "nats://n2:6222,nats://n3:6222",
	})
	if err != nil {
		t.Fatal(err)
	}
	wantC := broker.ClientConfig{
		URLs:  []string{"nats://a:4222", "nats://b:4222", "nats://c:4222"},
		Creds: "x.creds", CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem",
	}
	if diff := cmp.Diff(wantC, c); diff != "" {
		t.Errorf("ClientConfig (-want +got):\n%s", diff)
	}
	wantS := broker.ServerConfig{
		DataDir: "/var/lib/formica", Listen: "0.0.0.0:4222", AllowRemote: true, ServerName: "n1",
		Cluster: &broker.ClusterConfig{Name: "formica", Listen: "0.0.0.0:6222", Routes: []string{"nats://n2:6222", "nats://n3:6222"}},
	}
	if diff := cmp.Diff(wantS, s); diff != "" {
		t.Errorf("ServerConfig (-want +got):\n%s", diff)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("flag-built ServerConfig invalid: %v", err)
	}
}

func TestRegisterFlagsKeepsDefaults(t *testing.T) {
	c := broker.ClientConfig{URLs: []string{"nats://default:4222"}}
	s := broker.ServerConfig{Listen: "127.0.0.1:4222"}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	s.RegisterServerFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"nats://default:4222"}, c.URLs); diff != "" {
		t.Errorf("URLs (-want +got):\n%s", diff)
	}
	if s.Listen != "127.0.0.1:4222" || s.Cluster != nil {
		t.Errorf("ServerConfig changed without flags: %+v", s)
	}
}

func TestCustomInboxPrefix(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream())
	nc, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: []string{s.ClientURL()}, InboxPrefix: "_INBOX_worker"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.NewInbox(); !strings.HasPrefix(got, "_INBOX_worker.") {
		t.Fatalf("NewInbox = %q, want the custom prefix", got)
	}
}
