package coordinator

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
)

// BenchmarkHelperEvents is the event path of one helper as a coordinator
// publishes it (a one-turn helper: its spawn, start, model call and end,
// and its parent's agent tool call and result, those two and the model
// call relayed from workers), from relay and publish through the ordered
// queue to NATS: "core" on a server without JetStream, "stored" with the
// run store's events stream keeping every event, in batches (stored/op is
// the stored messages per helper). An op is one helper's events, sent and,
// when stored, stored (the last flush waits until they are).
func BenchmarkHelperEvents(b *testing.B) {
	for _, stored := range []bool{false, true} {
		name := "core"
		if stored {
			name = "stored"
		}
		b.Run(name, func(b *testing.B) { benchHelperEvents(b, stored) })
	}
}

func benchHelperEvents(b *testing.B, stored bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := broker.ServerConfig{}
	if stored {
		cfg.JetStream, cfg.DataDir = true, b.TempDir()
	}
	srv, err := broker.StartServer(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("coordinator")
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	var st jetstream.Stream
	var logStore *store.Store
	if stored {
		if logStore, err = store.Open(ctx, nc, store.Config{}); err != nil {
			b.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		if st, err = js.Stream(ctx, store.EventsStream); err != nil {
			b.Fatal(err)
		}
	}
	c, err := New(Config{Conn: nc, Cwd: os.TempDir(), Store: logStore})
	if err != nil {
		b.Fatal(err)
	}
	rn := &run{id: "run-1", rec: record.NewRecorder(nil)}
	parent := &threadRec{thread: thread.Thread{RunID: "run-1", ID: "root-1", Name: "bench"}}
	helper := &threadRec{thread: thread.Thread{RunID: "run-1", ID: "helper-1", ParentID: "root-1", Depth: 1, Name: "part"}}
	usage := model.Usage{InputTokens: 120, OutputTokens: 40}
	call := func() []event.Event {
		return []event.Event{{Type: event.ToolCall, Time: time.Now(), Tool: "agent", CallID: "call-1",
			Arguments: `{"name":"part","task":"part 1 of the plan"}`}}
	}
	result := func() []event.Event {
		return []event.Event{{Type: event.ToolResult, Time: time.Now(), Tool: "agent", CallID: "call-1", Output: "part 1 done"}}
	}
	modelCall := func() []event.Event {
		return []event.Event{{Type: event.ModelCall, Time: time.Now(), Model: "sim", Usage: usage, Latency: event.Duration(time.Millisecond)}}
	}
	const perHelper = 6
	for b.Loop() {
		c.relay(rn, parent, call(), "bench")
		spawned := threadEvent(event.ThreadSpawned, &helper.thread)
		spawned.CallID = "call-1"
		c.publish(spawned)
		started := threadEvent(event.ThreadStarted, &helper.thread)
		started.Worker = "w1"
		c.publish(started)
		c.relay(rn, helper, modelCall(), "bench")
		finished := threadEvent(event.ThreadFinished, &helper.thread)
		finished.Status, finished.Usage = event.Succeeded, usage
		c.publish(finished)
		c.relay(rn, parent, result(), "bench")
	}
	if !c.events.flush(time.Minute) {
		b.Fatal("events not sent")
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		b.Fatal(err)
	}
	if stored {
		// A flush returns once the events stream has stored what came before.
		info, err := st.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(info.State.Msgs)/float64(b.N), "stored/op")
	}
	b.ReportMetric(perHelper, "events/op")
}
