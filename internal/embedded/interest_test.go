package embedded

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/runner"
)

// TestEventsOnlyWhenSomebodyListens: a coordinator on its own embedded
// server (secured, no events stream) publishes a run's events only while
// something subscribes to them: a run nobody follows costs the server none
// of its event messages, and a watcher of the next run gets every one.
func TestEventsOnlyWhenSomebodyListens(t *testing.T) {
	a, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Config{Workers: 2, Slots: 4, Authority: a,
		Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: time.Second,
		Coordinator: coordinator.Config{Cwd: os.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	nc, err := s.ConnectAs(auth.Client, "tester", "tester")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := oneshot.New(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	received := func() int64 {
		v, err := s.Server.NATS().Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.InMsgs
	}
	const task = "Plan:\n- a\n- b\n- c"

	unwatched := simSubmit(t, task, 0, limits.Config{})
	before := received()
	if rec := runAsync(t, context.Background(), cl, unwatched, nil)(); rec.Status != event.Succeeded {
		t.Fatalf("unwatched run: %s (%s)", rec.Status, rec.Error)
	}
	quiet := received() - before

	watched := simSubmit(t, task, 0, limits.Config{})
	w, err := s.ConnectAs(auth.Client, "watcher", "watcher")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var mu sync.Mutex
	var types []event.Type
	finished := make(chan struct{})
	sub, err := w.Subscribe("formica.events."+watched.RunID+".>", func(m *nats.Msg) {
		e, err := event.Unmarshal(m.Data)
		if err != nil {
			t.Errorf("%s: %v", m.Subject, err)
			return
		}
		mu.Lock()
		types = append(types, e.Type)
		mu.Unlock()
		if e.Type == event.RunFinished {
			close(finished)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	before = received()
	if rec := runAsync(t, context.Background(), cl, watched, nil)(); rec.Status != event.Succeeded {
		t.Fatalf("watched run: %s (%s)", rec.Status, rec.Error)
	}
	loud := received() - before
	select {
	case <-finished: // the last event
	case <-time.After(runTimeout):
		t.Fatal("the watcher got no run.finished")
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	count := map[event.Type]int{}
	for _, typ := range types {
		count[typ]++
	}
	if count[event.RunStarted] != 1 || count[event.RunFinished] != 1 || count[event.ThreadSpawned] != 3 ||
		count[event.ThreadFinished] != 4 || count[event.ModelCall] != 5 {
		t.Errorf("the watcher got %v, want every event of the run", count)
	}
	// The runs are alike but for the watcher, so the server received about
	// the watched run's events more for it (heartbeats aside).
	const heartbeats = 6
	if extra := loud - quiet; extra < int64(len(types))-heartbeats {
		t.Errorf("the server received %d messages for the unwatched run and %d for the watched one: %d events were published for nobody",
			quiet, loud, int64(len(types))-extra)
	}
}
