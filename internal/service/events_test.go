package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
)

// TestEventsAfterRunFinishedBeforeTheRecord: between a run's run.finished
// and its final record, a client that already has the run.finished (it
// asks after it) gets an ended stream, not a wait for a run.finished that
// never comes. One that asks from before it gets it; a run resumed since
// (started after that run.finished) is followed.
func TestEventsAfterRunFinishedBeforeTheRecord(t *testing.T) {
	srv := brokertest.Start(t)
	nc, err := srv.Connect("api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, svc := openService(t, nc, store.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	started := time.Now().UTC()
	if _, err := st.CreateRecord(ctx, record.Run{RunID: "gap", Status: event.Running, Task: "t", CreatedAt: started, StartedAt: started}); err != nil {
		t.Fatal(err)
	}
	var batch []byte
	for _, typ := range []event.Type{event.RunStarted, event.RunFinished} {
		line, err := event.Marshal(event.Event{Type: typ, RunID: "gap", Status: event.Succeeded, Time: started.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		batch = append(append(batch, line...), '\n')
	}
	f, err := st.AppendEvents("gap", batch)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WaitStored(ctx, []jetstream.PubAckFuture{f}); err != nil {
		t.Fatal(err)
	}
	last, err := st.LastEventID(ctx, "gap")
	if err != nil {
		t.Fatal(err)
	}

	follow := func(after uint64, within time.Duration) ([]event.Type, error) {
		fctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		var got []event.Type
		err := svc.Events(fctx, "gap", after, func(_ uint64, e event.Event) error {
			got = append(got, e.Type)
			return nil
		})
		return got, err
	}
	if got, err := follow(last, waitTimeout); err != nil || len(got) != 0 {
		t.Errorf("after the run.finished: %v, %v; want an ended stream with nothing", got, err)
	}
	if got, err := follow(0, waitTimeout); err != nil || len(got) != 2 || got[1] != event.RunFinished {
		t.Errorf("from the start: %v, %v; want run.started, run.finished", got, err)
	}

	// Resumed and started again after that run.finished: its next
	// execution is followed, until the client gives up here.
	if _, err := st.UpdateRecord(ctx, "gap", func(r *record.Run) error {
		r.StartedAt = started.Add(time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := follow(last, 500*time.Millisecond); err == nil || len(got) != 0 {
		t.Errorf("a later execution: %v, %v; want it followed until the client's context ended", got, err)
	}
}
