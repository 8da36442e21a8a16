package embedded

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// TestAssetsStayFixed: what a client counts through a coordinator
// (`formica assets`, GET /v1/assets) and the coordinator's gauges show is
// the store's fixed set of streams, with the queue's consumer and one lease
// watch per coordinator; a second coordinator adds only its lease watch,
// and 50 workers, 12 runs with 48 live helpers and 120 watchers add
// nothing, while they run and once they ended. The second coordinator
// stopped, its consumer is gone.
func TestAssetsStayFixed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 50 workers")
	}
	m := metrics.New(metrics.All)
	var cfg Config
	s, _ := startSecuredWith(t, func(c *Config) { c.Metrics = m; cfg = *c })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nc, err := s.ConnectAs(auth.Client, "counter", "counter")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, nc, store.Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Conn: nc, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	count := func(when string) wire.Assets {
		t.Helper()
		a, err := svc.Assets(ctx)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		t.Logf("%s: %d streams, %d consumers", when, a.Streams, a.Consumers)
		return a
	}
	same := func(when string, got, want wire.Assets) {
		t.Helper()
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(wire.Assets{}, "CountedAt")); diff != "" {
			t.Errorf("%s (-before +now):\n%s", when, diff)
		}
	}

	one := count("one coordinator, 2 workers")
	if one.Streams != store.OwnStreams || one.Consumers != 3 {
		t.Errorf("%d streams, %d consumers; want %d and 3 (the queue's, the webhooks', a lease watch)", one.Streams, one.Consumers, store.OwnStreams)
	}
	for _, k := range one.Kinds {
		want := [2]int{1, 0}
		switch k.Kind {
		case store.KindQueue, store.KindWebhooks, store.KindKVLeases:
			want = [2]int{1, 1}
		case store.KindLegacyTransfers, store.KindOther:
			want = [2]int{}
		}
		if got := [2]int{k.Streams, k.Consumers}; got != want {
			t.Errorf("%s: %d streams, %d consumers; want %v", k.Kind, k.Streams, k.Consumers, want)
		}
	}
	gauges(t, m, one)

	c2, err := Start(ctx, Config{
		Connect:           func(name string) (*nats.Conn, error) { return s.dial(auth.Coordinator, "coordinator-2", name) },
		LocalServer:       s.Server,
		Durable:           true,
		HeartbeatInterval: cfg.HeartbeatInterval,
		Coordinator:       coordinator.Config{Cwd: os.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	two := count("two coordinators")
	if two.Streams != one.Streams || two.Consumers != one.Consumers+1 {
		t.Errorf("a second coordinator: %d streams, %d consumers; want %d and %d", two.Streams, two.Consumers, one.Streams, one.Consumers+1)
	}

	const fleet = 50
	for i := len(s.Workers); i < fleet; i++ {
		if err := s.startWorker(ctx, cfg, fmt.Sprintf("fleet-%02d", i), fmt.Sprintf("formica-worker-%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*coordinator.Coordinator{s.Coordinator, c2.Coordinator} {
		for len(c.Workers()) < fleet {
			select {
			case <-ctx.Done():
				t.Fatalf("%d of %d workers registered with %s", len(c.Workers()), fleet, c.ID())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	same(fmt.Sprintf("%d workers", fleet), count(fmt.Sprintf("%d workers", fleet)), two)

	// Runs whose four helpers each wait an hour for their model, each run
	// followed by ten watchers, every one of which sees the four start.
	const runs, helpers, watchers = 12, 4, 10
	var ids []string
	for range runs {
		sub := simSubmit(t, "Plan:\n- a\n- b\n- c\n- d", 0, limits.Config{})
		sub.Agent.Helper.Model = "sim"
		sub.Agent.Helper.ModelArgs = model.Args{"latency_ms": int(time.Hour / time.Millisecond)}
		if err := svc.Enqueue(ctx, sub); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.RunID)
	}
	var all, ended sync.WaitGroup
	var mu sync.Mutex
	open := map[string]int{} // watchers still following, by run
	all.Add(runs * watchers)
	for _, id := range ids {
		open[id] = watchers
		for range watchers {
			ended.Go(func() {
				started, told := 0, false
				err := svc.Events(ctx, id, 0, func(_ uint64, e event.Event) error {
					if e.Type == event.ThreadStarted && e.Depth == 1 {
						if started++; started == helpers && !told {
							told = true
							all.Done()
						}
					}
					return nil
				})
				mu.Lock()
				open[id]--
				mu.Unlock()
				if !told {
					all.Done()
					t.Errorf("run %s: a watcher saw %d helpers start, want %d (%v)", id, started, helpers, err)
				}
			})
		}
	}
	all.Wait()
	if n := svc.Following(); n != runs {
		t.Errorf("%d watchers follow %d runs through %d subscriptions", runs*watchers, runs, n)
	}
	same("runs going, watched", count(fmt.Sprintf("%d runs with %d live helpers, %d watchers", runs, runs*helpers, runs*watchers)), two)

	for _, id := range ids {
		if err := svc.CancelRun(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan struct{})
	go func() { ended.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(runTimeout):
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if open[id] > 0 {
				r, err := svc.GetRun(ctx, id)
				t.Errorf("run %s: %d watchers still follow it; its record: %s, %v", id, open[id], r.Status, err)
			}
		}
		t.Fatalf("the watchers of cancelled runs did not end within %v (%d runs followed)", runTimeout, svc.Following())
	}
	for _, id := range ids {
		// The record is final once the run's events are stored.
		records, err := st.WatchRecord(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var r record.Run
		for r = range records {
			if r.Status.Final() {
				break
			}
		}
		if r.Status != event.Cancelled {
			t.Errorf("run %s: %s; want cancelled", id, r.Status)
		}
	}
	same("runs ended", count("runs ended"), two)

	if err := c2.Stop(); err != nil {
		t.Fatal(err)
	}
	last := count("the second coordinator stopped")
	same("the second coordinator stopped", last, one)
	gauges(t, m, last)
}

// gauges checks that m exports a as its JetStream gauges.
func gauges(t *testing.T, m *metrics.Metrics, a wire.Assets) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, k := range a.Kinds {
		for _, want := range []string{
			fmt.Sprintf("formica_jetstream_streams{kind=%q} %d\n", k.Kind, k.Streams),
			fmt.Sprintf("formica_jetstream_consumers{kind=%q} %d\n", k.Kind, k.Consumers),
		} {
			if !strings.Contains(body, want) {
				t.Errorf("no %q in the metrics", strings.TrimSpace(want))
			}
		}
	}
}
