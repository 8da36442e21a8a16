package store

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/wire"
)

// TestClientChangesNothing: a client store (the CLI, a worker) opened with
// the default Config after a coordinator's keeps the coordinator's settings,
// and can enqueue and read records; opened first, it creates what is
// missing, and the coordinator's Open then applies its settings.
func TestClientChangesNothing(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	for _, clientFirst := range []bool{false, true} {
		srv := brokertest.Start(t)
		coordCfg := Config{AckWait: 2 * time.Second, MaxRunSlots: 8, DuplicateWindow: time.Hour}
		var client *Store
		var err error
		if clientFirst {
			if client, err = Open(ctx, connect(t, srv), Config{Client: true}); err != nil {
				t.Fatalf("client Open on an empty server: %v", err)
			}
		}
		coord, err := Open(ctx, connect(t, srv), coordCfg)
		if err != nil {
			t.Fatal(err)
		}
		if !clientFirst {
			if client, err = Open(ctx, connect(t, srv), Config{Client: true}); err != nil {
				t.Fatal(err)
			}
		}
		js, _ := jetstream.New(connect(t, srv))
		cons, err := js.Consumer(ctx, QueueStream, QueueConsumer)
		if err != nil {
			t.Fatal(err)
		}
		if got := cons.CachedInfo().Config; got.AckWait != 2*time.Second || got.MaxAckPending != 8 {
			t.Errorf("client first %v: consumer AckWait %v, MaxAckPending %d; want the coordinator's 2s, 8", clientFirst, got.AckWait, got.MaxAckPending)
		}
		if got := client.Config().DuplicateWindow; !clientFirst && got != time.Hour {
			t.Errorf("client first %v: client DuplicateWindow %v, want the stream's 1h", clientFirst, got)
		}
		if _, err := client.Next(ctx); !errors.Is(err, ErrClient) {
			t.Errorf("client Next: %v, want ErrClient", err)
		}
		if _, err := client.Enqueue(ctx, wire.RunSubmit{RunID: "r1", Task: "t"}); err != nil {
			t.Fatal(err)
		}
		sub, err := coord.Next(ctx)
		if err != nil || sub.Sub.RunID != "r1" {
			t.Fatalf("coordinator Next: %v, %+v", err, sub)
		}
		sub.Ack(ctx)
		if _, _, err := client.GetRecord(ctx, "r1"); err != nil {
			t.Errorf("client GetRecord: %v", err)
		}
	}
}

// Config returns the configuration in effect, defaults filled in.
func (s *Store) Config() Config { return s.cfg }
