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

// retry runs f with a short per-attempt timeout until it succeeds, bounded
// by ctx. While a killed node's stream or meta leadership moves, JetStream
// API requests can go unanswered rather than fail, so a single call with
// the whole test's ctx could wait out all of it.
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func publishRetry(ctx context.Context, js jetstream.JetStream, subject, id string) error {
	return retry(ctx, "publish "+id, func(ctx context.Context) error {
		_, err := js.Publish(ctx, subject, []byte(id), jetstream.WithMsgID(id))
		return err
	})
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
		if n.NATS().Name() == nc.ConnectedServerName() {
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
		time.Since(killed).Round(time.Millisecond), victim.NATS().Name(), nc.ConnectedServerName())
	if nc.ConnectedServerName() == victim.NATS().Name() {
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

	// Both messages are in the stream, readable through the survivors. Wait
	// for them to agree on a meta leader first (the killed node may have
	// been it), as any JetStream management step after a loss should.
	waited := time.Now()
	if err := brokertest.WaitCluster(nodes, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("survivors ready for JetStream management after %s", time.Since(waited).Round(time.Millisecond))
	for seq, want := range []string{"before", "after"} {
		var got string
		if err := retry(ctx, "read "+want, func(ctx context.Context) error {
			m, err := stream.GetMsg(ctx, uint64(seq+1))
			if err == nil {
				got = string(m.Data)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("message %d is %q, want %q", seq+1, got, want)
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
