package worker

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// logRecords keeps what a logger was given.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// lines returns the attributes of each record with message msg.
func (l *logRecords) lines(msg string) []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// TestFencedParentLeavesItsHelpers: a placement superseded while it waits
// on three helpers is stopped with one log line, which counts the helpers,
// however often heartbeats name it; and it sends no cancel for those
// helpers, which belong to the thread's current placement now (the
// coordinator would refuse, and log, each cancel from a superseded one).
func TestFencedParentLeavesItsHelpers(t *testing.T) {
	ctx := context.Background()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	wnc, err := srv.Connect("worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	logs := &logRecords{}
	w, err := New(Config{ID: "w1", Conn: wnc, Slots: 8, Models: runner.ModelOpenerFunc(providers.Open),
		HeartbeatInterval: 100 * time.Millisecond, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })

	// The test is the coordinator: it admits each spawn (a progress naming
	// the helper) and keeps it running, and it counts cancels of helpers.
	cnc, err := srv.Connect("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	coord, err := natstransport.New(cnc, natstransport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close() })
	spawns := make(chan string, 16)
	spawnSub, err := cnc.Subscribe(wire.SubjectSpawn("c1", "w1"), func(m *nats.Msg) {
		var req wire.SpawnRequest
		if err := wire.DecodeAs(m.Data, wire.TypeSpawnRequest, &req); err != nil {
			t.Errorf("spawn request: %v", err)
			return
		}
		child := "helper-" + req.Name
		if err := m.Respond(wire.MustEncode(wire.TypeProgress, wire.Progress{ThreadID: child})); err != nil {
			t.Errorf("admit %s: %v", child, err)
		}
		spawns <- child
	})
	if err != nil {
		t.Fatal(err)
	}
	defer spawnSub.Unsubscribe()
	// The worker's cancels and its results share its one connection, so
	// every cancel it sent before the parent's result is in here by then.
	cancels := make(chan *nats.Msg, 16)
	cancelSub, err := cnc.ChanSubscribe(wire.SubjectThreadCancel("c1", "w1"), cancels)
	if err != nil {
		t.Fatal(err)
	}
	defer cancelSub.Unsubscribe()
	if err := cnc.Flush(); err != nil {
		t.Fatal(err)
	}

	hb := func(f ...wire.Fenced) {
		m := wire.Message(wire.TypeCoordHeartbeat, wire.CoordHeartbeat{ID: "c1", Epoch: "e1", Interval: 100 * time.Millisecond, Uptime: time.Minute, Fenced: f})
		if err := coord.Publish(ctx, wire.SubjectCoordHeartbeats, m); err != nil {
			t.Error(err)
		}
	}
	stopBeat := make(chan struct{})
	beat := make(chan struct{})
	go func() { // keep the lease fresh, so only the fence stops the parent
		defer close(beat)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-tk.C:
				hb()
			}
		}
	}()
	defer func() { close(stopBeat); <-beat }()

	parallel := true
	a := spec.Agent{Name: "lead", Model: providers.Sim, Tools: []string{tools.AgentToolName}, ParallelToolCalls: &parallel}
	th := thread.Thread{RunID: "r1", ID: "t1", Path: "root", Name: "lead", Task: "Plan:\n- a\n- b\n- c", Agent: a, Cwd: t.TempDir()}
	req := wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 1, Token: "tok", Uptime: time.Minute}
	call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	for range 3 {
		select {
		case <-spawns:
		case <-time.After(30 * time.Second):
			t.Fatal("the parent did not ask for its three helpers")
		}
	}
	fence := wire.Fenced{Worker: "w1", ThreadID: "t1", Attempt: 1}
	for range 3 {
		hb(fence)
	}
	if er := awaitResult(t, ctx, call, 30*time.Second); er.Result.Status != event.Cancelled {
		t.Errorf("parent ended %s (%s), want cancelled", er.Result.Status, er.Result.Error)
	}

	if n := len(cancels); n != 0 {
		t.Errorf("the superseded placement sent %d cancels of its helpers, want none", n)
	}
	lines := logs.lines("placement superseded: cancelling thread")
	if len(lines) != 1 {
		t.Fatalf("%d log lines for the superseded placement, want 1: %v", len(lines), lines)
	}
	if got := lines[0]["helpers"]; got.Kind() != slog.KindInt64 || got.Int64() != 3 {
		t.Errorf("the line counts %v helpers, want 3: %v", got, lines[0])
	}
}
