package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

// publishRetry publishes to JetStream, retrying while a killed node's
// stream or meta leadership moves (a few seconds at most), bounded by ctx.
func publishRetry(ctx context.Context, js jetstream.JetStream, subject, id string) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(attempt, subject, []byte(id), jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("publish %s: %w (last error: %v)", id, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestClusterSurvivesNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	begin := time.Now()
	nodes := brokertest.StartCluster(t, 3)
	t.Logf("cluster ready after %s", time.Since(begin).Round(time.Millisecond))

	ctx := ctxT(t, 45*time.Second)
	nc, err := broker.Connect(ctx, broker.ClientConfig{
		URLs: brokertest.URLs(nodes...), Name: "survivor", ReconnectWait: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "EVENTS", Subjects: []string{"events.>"}, Replicas: 3, Storage: jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := publishRetry(ctx, js, "events.a", "before"); err != nil {
		t.Fatal(err)
	}

	// Kill the node the client is on, forcing a reconnect; the stream keeps
	// two of three replicas, still a quorum.
	var victim *broker.Server
	for _, n := range nodes {
		if n.Name() == nc.ConnectedServerName() {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("client on unknown server %q", nc.ConnectedServerName())
	}
	killed := time.Now()
	victim.Shutdown()

	if err := publishRetry(ctx, js, "events.a", "after"); err != nil {
		t.Fatal(err)
	}
	t.Logf("JetStream publish recovered %s after killing %s; client now on %s",
		time.Since(killed).Round(time.Millisecond), victim.Name(), nc.ConnectedServerName())
	if nc.ConnectedServerName() == victim.Name() {
		t.Fatal("client still reports the killed server")
	}

	// Core pub/sub across the surviving nodes.
	var other *broker.Server
	for _, n := range nodes {
		if n != victim {
			other = n
		}
	}
	local, err := other.Connect("local")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	roundTrip(t, nc, local, "formica.cluster")
	roundTrip(t, local, nc, "formica.cluster")

	// Both messages are in the stream, readable through the survivors.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"before", "after"} {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("read %s: %v", want, err)
		}
		if got := string(m.Data()); got != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 || info.Config.Replicas != 3 {
		t.Fatalf("stream: %d msgs, %d replicas; want 2 and 3", info.State.Msgs, info.Config.Replicas)
	}
}
