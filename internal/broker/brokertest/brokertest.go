// Package brokertest starts real NATS servers for tests: loopback, random
// ports, JetStream stores in t.TempDir(), shut down by t.Cleanup. Every wait
// is bounded so a broken cluster fails the test instead of hanging it.
package brokertest

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker"
)

// StartTimeout bounds each server start.
const StartTimeout = 15 * time.Second

// Option adjusts the ServerConfig a test server starts with.
type Option func(*broker.ServerConfig)

// WithToken requires clients to present tok.
func WithToken(tok string) Option {
	return func(c *broker.ServerConfig) { c.Token = tok }
}

// WithUser requires clients to log in as user with password.
func WithUser(user, password string) Option {
	return func(c *broker.ServerConfig) { c.User, c.Password = user, password }
}

// WithTLS serves clients over TLS with tc.
func WithTLS(tc *tls.Config) Option {
	return func(c *broker.ServerConfig) { c.TLS = tc }
}

// WithoutJetStream starts a core-NATS-only server.
func WithoutJetStream() Option {
	return func(c *broker.ServerConfig) { c.JetStream, c.DataDir = false, "" }
}

// WithoutListener starts an in-process-only server (no TCP port).
func WithoutListener() Option {
	return func(c *broker.ServerConfig) { c.Listen = "" }
}

// WithLogger sends the server's log to l (default: discarded).
func WithLogger(l *slog.Logger) Option {
	return func(c *broker.ServerConfig) { c.Logger = l }
}

// WithConfig applies any other change.
func WithConfig(f func(*broker.ServerConfig)) Option { return Option(f) }

// Start starts a server listening on a random 127.0.0.1 port with
// JetStream stored under t.TempDir(), and shuts it down at cleanup.
func Start(t testing.TB, opts ...Option) *broker.Server {
	t.Helper()
	s, err := startNode(t, 0, nil, opts)
	if err != nil {
		t.Fatalf("brokertest: start %s: %v", serverName(t, 0), err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// startNode starts node i (0: a lone server) of cluster (nil: none) on a
// random 127.0.0.1 port with JetStream stored under t.TempDir(), opts
// applied, bounded by StartTimeout.
func startNode(t testing.TB, i int, cluster *broker.ClusterConfig, opts []Option) (*broker.Server, error) {
	cfg := broker.ServerConfig{
		Listen:     "127.0.0.1:0",
		JetStream:  true,
		DataDir:    t.TempDir(),
		ServerName: serverName(t, i),
		Cluster:    cluster,
	}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	return broker.StartServer(ctx, cfg)
}

// URLs returns the client URLs of the running servers among ss (one
// shut down in a test is skipped), for broker.ClientConfig.URLs.
func URLs(ss ...*broker.Server) []string {
	var urls []string
	for _, s := range ss {
		if s.NATS().Running() {
			if u := s.ClientURL(); u != "" {
				urls = append(urls, u)
			}
		}
	}
	return urls
}

// serverName makes names unique per test and readable in logs.
func serverName(t testing.TB, i int) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if i == 0 {
		return name
	}
	return name + "-n" + strconv.Itoa(i)
}
