package broker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

// Auth is tested over TCP: over the in-process pipe a refusal surfaces as
// "read/write on closed pipe" instead of the authorization error (docs/nats.md).
func TestTokenAuth(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithToken("s3cret"), brokertest.WithoutJetStream())
	url := []string{s.ClientURL()}

	good, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: url, Token: "s3cret"})
	if err != nil {
		t.Fatalf("good token: %v", err)
	}
	defer good.Close()

	for _, cfg := range []broker.ClientConfig{
		{URLs: url, Token: "wrong"},
		{URLs: url},
	} {
		nc, err := broker.Connect(ctxT(t, 10*time.Second), cfg)
		if err == nil {
			nc.Close()
			t.Fatalf("token %q: connected, want an authorization error", cfg.Token)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("token %q: err = %v, want nats.ErrAuthorization", cfg.Token, err)
		}
	}

	// In-process clients get the server's token without asking.
	local, err := s.Connect("local")
	if err != nil {
		t.Fatalf("in-process connect with token auth: %v", err)
	}
	defer local.Close()
	roundTrip(t, good, local, "formica.auth")
}

func TestUserPasswordAuth(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithUser("worker", "pw"), brokertest.WithoutJetStream())
	url := []string{s.ClientURL()}

	good, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: url, User: "worker", Password: "pw"})
	if err != nil {
		t.Fatalf("good password: %v", err)
	}
	defer good.Close()

	nc, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: url, User: "worker", Password: "nope"})
	if err == nil {
		nc.Close()
		t.Fatal("bad password connected")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("bad password: err = %v, want nats.ErrAuthorization", err)
	}

	local, err := s.Connect("local")
	if err != nil {
		t.Fatalf("in-process connect with user auth: %v", err)
	}
	defer local.Close()
	roundTrip(t, local, good, "formica.user")
}
