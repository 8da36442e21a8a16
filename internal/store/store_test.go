package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/wire"
)

// ctxT is a context bounded by d and cancelled at cleanup.
func ctxT(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// connect opens a connection to srv, closed at cleanup.
func connect(t testing.TB, srv *broker.Server) *nats.Conn {
	t.Helper()
	nc, err := srv.Connect(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// openStore starts a server and opens a store on it with cfg.
func openStore(t testing.TB, cfg Config) (*Store, *nats.Conn) {
	t.Helper()
	nc := connect(t, brokertest.Start(t))
	s, err := Open(ctxT(t, 10*time.Second), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, nc
}

func TestOpenIdempotentAndConcurrent(t *testing.T) {
	srv := brokertest.Start(t)
	ctx := ctxT(t, 20*time.Second)
	nc := connect(t, srv)
	cfg := Config{AckWait: 2 * time.Second, MaxRunSlots: 8}
	if _, err := Open(ctx, nc, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, nc, cfg); err != nil {
		t.Fatalf("second Open: %v", err)
	}
	// Several coordinators starting at once, each on its own connection,
	// one of them with a changed setting (an upgrade).
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		c := cfg
		if i == 3 {
			c.EventsMaxAge = time.Hour
		}
		nc := connect(t, srv)
		wg.Go(func() {
			_, err := Open(ctx, nc, c)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}

	js, _ := jetstream.New(nc)
	q, err := js.Stream(ctx, QueueStream)
	if err != nil {
		t.Fatal(err)
	}
	if qc := q.CachedInfo().Config; qc.Retention != jetstream.WorkQueuePolicy || qc.Duplicates != DefaultDuplicateWindow {
		t.Fatalf("queue stream config: %+v", qc)
	}
	ci, err := js.Consumer(ctx, QueueStream, QueueConsumer)
	if err != nil {
		t.Fatal(err)
	}
	cc := ci.CachedInfo().Config
	if cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != 2*time.Second ||
		cc.MaxDeliver != DefaultMaxDeliver || cc.MaxAckPending != 8 {
		t.Fatalf("consumer config: %+v", cc)
	}
	ev, err := js.Stream(ctx, EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if ec := ev.CachedInfo().Config; ec.Discard != jetstream.DiscardOld || ec.Retention != jetstream.LimitsPolicy {
		t.Fatalf("events stream config: %+v", ec)
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"replicas", Config{Replicas: 7}},
		{"negative age", Config{EventsMaxAge: -time.Second}},
		{"tiny ack wait", Config{AckWait: time.Millisecond}},
		{"negative slots", Config{MaxRunSlots: -1}},
		{"journal past retention", Config{Retention: time.Hour, JournalMaxAge: 2 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Open(context.Background(), &nats.Conn{}, tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := Open(context.Background(), nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil conn: %v", err)
	}
}

func TestOpenCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	nodes := brokertest.StartCluster(t, 3)
	ctx := ctxT(t, 60*time.Second)
	nc, err := broker.Connect(ctx, broker.ClientConfig{URLs: brokertest.URLs(nodes...), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := Open(ctx, nc, Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{QueueStream, EventsStream, "KV_" + RunsBucket, "KV_" + ApprovalsBucket, ObjectStream(PayloadsBucket)} {
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("%s has %d replicas, want 3", name, r)
		}
	}
	if _, err := Open(ctx, nc, Config{Replicas: 3}); err != nil {
		t.Fatalf("second Open: %v", err)
	}

	if _, err := s.Enqueue(ctx, wire.RunSubmit{RunID: "r3", Task: "t"}); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.InProgress(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateRecord(ctx, "r3", func(r *record.Run) error { r.Attempts++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := sub.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _, err := s.GetRecord(ctx, "r3"); err != nil || r.Attempts != 1 {
		t.Fatalf("record %+v, %v", r, err)
	}
	// Followed on the cluster: the stream's leader republishes, any
	// replica answers the direct gets.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.WatchRecord(wctx, "r3")
	if err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.Attempts != 1 {
		t.Fatalf("watched %+v", r)
	}
	if _, err := s.UpdateRecord(ctx, "r3", func(r *record.Run) error { r.Attempts++; return nil }); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.Attempts != 2 {
		t.Fatalf("watched update %+v", r)
	}
}

// TestJournalKeptNoLongerThanRetention: journals default to 7 days, or to
// the retention when that is shorter (their large entries and the run's
// record would be gone first).
func TestJournalKeptNoLongerThanRetention(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{}, DefaultJournalMaxAge},
		{Config{Retention: time.Hour}, time.Hour},
		{Config{Retention: time.Hour, JournalMaxAge: time.Minute}, time.Minute},
	} {
		_, nc := openStore(t, tc.cfg)
		js, _ := jetstream.New(nc)
		st, err := js.Stream(ctxT(t, 10*time.Second), JournalStream)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.MaxAge; got != tc.want {
			t.Errorf("%+v: journal MaxAge %s, want %s", tc.cfg, got, tc.want)
		}
	}
}
