// Package apitest starts, for tests, a whole cluster behind its HTTP API:
// an embedded NATS server with JetStream, a coordinator with its durable
// store, a local worker that opens the sim and scripted:<file> models, and
// the API serving them with a bearer token on a free loopback port.
package apitest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/service"
)

// Token is the bearer token the API requires.
const Token = "apitest-token"

// Cluster is a running cluster and its API.
type Cluster struct {
	// URL is the API's base URL, http://127.0.0.1:PORT.
	URL string
	// NATS is the embedded server's client URL.
	NATS  string
	Stack *embedded.Stack
}

// Start starts a cluster whose components stop when t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := embedded.Start(ctx, embedded.Config{Durable: true, Workers: 1, Slots: 4,
		Server:        broker.ServerConfig{DataDir: t.TempDir(), JetStream: true, Listen: "127.0.0.1:0"},
		Models:        runner.ModelOpenerFunc(providers.Open),
		AllowScripted: true, Coordinator: coordinator.Config{Cwd: t.TempDir(), AllowScripted: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	nc, err := s.Connect("formica-api")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Conn: nc, Store: s.Store, DefaultModel: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Token: Token}, svc)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &Cluster{URL: "http://" + srv.Addr(), NATS: s.Server.ClientURL(), Stack: s}
}

// Script writes a scripted model's responses (YAML, see package
// model/scripted) to a file and returns its model ref, scripted:<file>.
func Script(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return "scripted:" + path
}
