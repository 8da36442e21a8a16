package auth_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
)

// An external nats-server that includes ServerConfig accepts the
// credentials the authority issues, with their role's permissions, and
// refuses a connection without them.
func TestServerConfigTrustsIssuedCredentials(t *testing.T) {
	data := t.TempDir()
	a, err := auth.Open(data, true)
	if err != nil {
		t.Fatal(err)
	}
	seeds, _ := filepath.Glob(filepath.Join(data, auth.Dir, "*.nk"))
	for _, p := range seeds {
		seed, _ := os.ReadFile(p)
		if strings.Contains(a.ServerConfig(), strings.TrimSpace(string(seed))) {
			t.Fatalf("the server configuration holds the seed of %s", p)
		}
	}
	if len(seeds) != 4 {
		t.Fatalf("found %d seeds, want 4", len(seeds))
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("trust.conf", a.ServerConfig())
	conf := write("nats.conf", "listen: 127.0.0.1:-1\ninclude trust.conf\n")
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server rejects the configuration: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}

	if nc, err := nats.Connect(s.ClientURL(), nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a connection without credentials was accepted")
	}

	c, err := a.Issue(auth.Worker, "w1")
	if err != nil {
		t.Fatal(err)
	}
	denied := make(chan error, 4)
	nc, err := nats.Connect(s.ClientURL(), append(c.Options(), nats.Timeout(5*time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err }))...)
	if err != nil {
		t.Fatalf("worker credentials refused: %v", err)
	}
	defer nc.Close()
	// Its own subjects are allowed, another worker's are not.
	own, err := nc.SubscribeSync("formica.worker.w1.exec")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.SubscribeSync("formica.worker.w2.exec"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-denied:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "formica.worker.w2") {
			t.Fatalf("unexpected error: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscribing to another worker's subjects was not refused")
	}
	if !own.IsValid() {
		t.Fatal("the worker's own subscription was dropped")
	}
}
