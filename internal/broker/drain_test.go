package broker_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

func TestDrainWaitsForClosed(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream(), brokertest.WithoutListener())
	nc, err := s.Connect("drainer")
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	if _, err := nc.Subscribe("formica.work", func(*nats.Msg) {
		time.Sleep(10 * time.Millisecond)
		handled.Add(1)
	}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for range n {
		if err := nc.Publish("formica.work", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := broker.Drain(nc, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !nc.IsClosed() {
		t.Fatalf("status %v after Drain, want CLOSED", nc.Status())
	}
	if got := handled.Load(); got != n {
		t.Fatalf("handled %d of %d messages before Drain returned", got, n)
	}
	if err := broker.Drain(nc, time.Second); err != nil {
		t.Fatalf("Drain of a closed connection: %v", err)
	}
}

func TestDrainTimeout(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithoutJetStream(), brokertest.WithoutListener())
	nc, err := s.Connect("stuck")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	if _, err := nc.Subscribe("formica.stuck", func(*nats.Msg) { <-release }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("formica.stuck", nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err = broker.Drain(nc, 200*time.Millisecond)
	if !errors.Is(err, broker.ErrDrainTimeout) {
		t.Fatalf("err = %v, want ErrDrainTimeout", err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("Drain took %s with a 200ms bound", d)
	}
	if !nc.IsClosed() {
		t.Fatal("connection not closed after a drain timeout")
	}
}
