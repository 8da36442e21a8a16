package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
	"github.com/formica-run/formica/test/proc"
)

// gatedModel is a model whose every answer the test gives: each call
// waits on asks until the test answers it.
type gatedModel struct{ asks chan gatedAsk }

// gatedAsk is one model call waiting for its answer.
type gatedAsk struct {
	req    model.Request
	answer chan model.Response
}

func (m *gatedModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	a := gatedAsk{req: req, answer: make(chan model.Response, 1)}
	select {
	case m.asks <- a:
	case <-ctx.Done():
		return model.Response{}, context.Cause(ctx)
	}
	select {
	case r := <-a.answer:
		return r, nil
	case <-ctx.Done():
		return model.Response{}, context.Cause(ctx)
	}
}

// next returns the model's next call.
func (m *gatedModel) next(t *testing.T, ctx context.Context) gatedAsk {
	t.Helper()
	select {
	case a := <-m.asks:
		return a
	case <-ctx.Done():
		t.Fatalf("the model was not called: %v", ctx.Err())
		return gatedAsk{}
	}
}

// TestOrphanedWorkerStartsNoToolCall: on a real NATS server, worker w1
// hosts a thread of coordinator c1, played by the test, whose model asks
// for one bash call after another (each appends a line to mark.txt).
//   - While c1's heartbeats come, a call starts at once.
//   - Once c1 has been silent past one heartbeat (and its slack), though
//     the lease still holds, the next call does not start: it waits, and
//     starts when a heartbeat comes again.
//   - When none comes before the lease lapses, the call never starts and
//     the thread is stopped (cancelled: placement lapsed).
func TestOrphanedWorkerStartsNoToolCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
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
	wnc, err := srv.Connect("worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)

	// Long enough that a loaded machine gets from a silence of one
	// interval to the next call well within the lease (three intervals).
	const interval = time.Second
	gm := &gatedModel{asks: make(chan gatedAsk)}
	models := runner.ModelOpenerFunc(func(ref string) (model.Model, error) {
		if ref != "test:gated" {
			return nil, fmt.Errorf("no model %q", ref)
		}
		return gm, nil
	})
	w, err := New(Config{ID: "w1", Conn: wnc, Slots: 1, Models: models, HeartbeatInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })

	// c1's heartbeats, as sent now; beating sends them every half interval
	// until stopped, and stopped waits until the last one is on its way.
	born := time.Now().Add(-time.Minute)
	beat := func() {
		m := wire.Message(wire.TypeCoordHeartbeat, wire.CoordHeartbeat{ID: "c1", Epoch: "e1", Interval: interval, Uptime: time.Since(born)})
		if err := coord.Publish(ctx, wire.SubjectCoordHeartbeats, m); err != nil {
			t.Errorf("heartbeat: %v", err)
		}
	}
	stopBeat, beatStopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(beatStopped)
		tk := time.NewTicker(interval / 2)
		defer tk.Stop()
		for {
			beat()
			select {
			case <-stopBeat:
				return
			case <-tk.C:
			}
		}
	}()
	stopBeating := sync.OnceFunc(func() {
		close(stopBeat)
		<-beatStopped
		cnc.Flush()
	})
	t.Cleanup(stopBeating)

	// The coordinator as this worker sees it: silent past one heartbeat
	// (no call may start), and a call waiting for its next heartbeat.
	seen := func(f func(c *coordSeen) bool) func() bool {
		return func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			c := w.coords["c1"]
			return c != nil && f(c)
		}
	}
	silent := seen(func(c *coordSeen) bool { return !c.recent(time.Now()) })
	waiting := seen(func(c *coordSeen) bool { return c.beat != nil })

	cwd := t.TempDir()
	marks := func() string {
		data, _ := os.ReadFile(filepath.Join(cwd, "mark.txt"))
		return string(data)
	}
	bash := func(n int) model.Response {
		return model.Response{ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("call_%d", n), Name: "bash",
			Arguments: fmt.Sprintf(`{"command":"echo %d >> mark.txt"}`, n)}}}
	}

	a := spec.Agent{Name: "orphan", Model: "test:gated", Harness: spec.Harness{Tools: []string{"bash"}}}
	th := thread.Thread{RunID: "r1", ID: "t1", Path: "root", Name: "orphan", Task: "leave marks", Agent: a, Cwd: cwd}
	req := wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 1, Token: "tok", Uptime: time.Since(born)}
	call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	if m, err := call.Next(ctx, 10*time.Second); err != nil || m.Type != string(wire.TypeExecAccepted) {
		t.Fatalf("placing t1: %v %s", err, m.Type)
	}

	// Heard from: the call starts at once; the model, asked again, has its result.
	gm.next(t, ctx).answer <- bash(1)
	ask := gm.next(t, ctx)
	if got := marks(); got != "1\n" {
		t.Fatalf("mark.txt %q after the first call, want its line", got)
	}

	// Silent past one heartbeat: the next call waits, and starts on the
	// next heartbeat.
	stopBeating()
	proc.WaitUntil(t, 10*time.Second, "c1 is silent past one heartbeat", silent)
	ask.answer <- bash(2)
	proc.WaitUntil(t, 10*time.Second, "the call waits for c1's next heartbeat (or starts)", func() bool {
		return waiting() || marks() != "1\n"
	})
	if got := marks(); got != "1\n" {
		t.Fatalf("mark.txt %q: the call started while c1 was silent past one heartbeat", got)
	}
	if err := w.leaseErr(&th); err != nil {
		t.Fatalf("the lease lapsed before the heartbeat came (a slow machine?): %v", err)
	}
	beat()
	ask = gm.next(t, ctx)
	if got := marks(); got != "1\n2\n" {
		t.Fatalf("mark.txt %q after c1's heartbeat came again, want the waiting call's line", got)
	}

	// Silent past one heartbeat and then past the lease: the call never
	// starts, and the thread is stopped.
	proc.WaitUntil(t, 10*time.Second, "c1 is silent past one heartbeat again", silent)
	ask.answer <- bash(3)
	proc.WaitUntil(t, 10*time.Second, "the call waits for c1's next heartbeat (or starts)", func() bool {
		return waiting() || marks() != "1\n2\n"
	})
	er := awaitResult(t, ctx, call, 10*time.Second)
	if er.Result.Status != event.Cancelled || !strings.Contains(er.Result.Error, errLapsed.Error()) {
		t.Errorf("thread ended %s (%s), want cancelled: %v", er.Result.Status, er.Result.Error, errLapsed)
	}
	if got := marks(); got != "1\n2\n" {
		t.Errorf("mark.txt %q: a call started for a coordinator gone silent", got)
	}
	// The model is told the call was not run, and why.
	var told []string
	for _, e := range er.Events {
		if e.Type == event.ToolResult && e.CallID == "call_3" {
			told = append(told, e.Output)
		}
	}
	if len(told) != 1 || !strings.HasPrefix(told[0], "Error: "+errLapsed.Error()) {
		t.Errorf("call_3's tool.result %q, want one saying the placement lapsed", told)
	}
}
