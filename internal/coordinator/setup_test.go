package coordinator

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/wire"
	"github.com/formica-run/formica/internal/worker"
)

// startOnNATS starts a coordinator on a fresh embedded server; conn
// connects more clients to it. Both go at cleanup.
func startOnNATS(t *testing.T, ctx context.Context) (*Coordinator, func(name string) *nats.Conn) {
	t.Helper()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	conn := func(name string) *nats.Conn {
		nc, err := srv.Connect(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	c, err := New(Config{Conn: conn("coordinator"), HeartbeatInterval: 200 * time.Millisecond, Cwd: os.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c, conn
}

// rootSetupHash is the hash of the setup of sub's root, as the submission
// arrives.
func rootSetupHash(t *testing.T, sub wire.RunSubmit) string {
	var got wire.RunSubmit
	if err := wire.DecodeAs(wire.MustEncode(wire.TypeRunSubmit, sub), wire.TypeRunSubmit, &got); err != nil {
		t.Fatal(err)
	}
	root := thread.Thread{Agent: got.Agent, Agents: got.Agents, Permissions: policy.Permissions{got.Agent.Harness.Permissions}}
	hash, _ := wire.EncodeSetup(&root)
	return hash
}

// TestSetupResentToAWorkerThatLacksIt: a worker that holds no setup of the
// hash a placement names (restarted since it took it, before its new
// heartbeat came) answers setup_missing, and the coordinator places the
// thread there again, once, with the setup; the run goes on. Threads
// placed on a worker known to hold their setup travel without it.
func TestSetupResentToAWorkerThatLacksIt(t *testing.T) {
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	c, conn := startOnNATS(t, ctx)

	// Every placement on w1, as the worker receives it.
	var mu sync.Mutex
	var placed []wire.ExecRequest
	seen := make(chan struct{}, 64)
	obs := conn("observer")
	if _, err := obs.Subscribe(wire.SubjectExec("w1"), func(m *nats.Msg) {
		var req wire.ExecRequest
		if err := wire.DecodeAs(m.Data, wire.TypeExecRequest, &req); err != nil {
			t.Errorf("exec request: %v", err)
			return
		}
		mu.Lock()
		placed = append(placed, req)
		mu.Unlock()
		seen <- struct{}{}
	}); err != nil {
		t.Fatal(err)
	}
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}

	w, err := worker.New(worker.Config{ID: "w1", Conn: conn("worker"), Slots: 8,
		Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for len(c.Workers()) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the worker never registered")
		case <-time.After(10 * time.Millisecond):
		}
	}

	a := spec.Default().Agent
	a.Model = providers.Sim
	a.ModelArgs = model.Args{"latency_ms": 0}
	par := false // helpers one at a time: the second is placed once the first was taken
	a.ParallelToolCalls = &par
	sub := wire.RunSubmit{RunID: uuid.NewString(), Task: "Plan:\n- a\n- b", Agent: a, Cwd: t.TempDir()}
	// The coordinator believes w1 holds the root's setup, which it never saw.
	rootHash := rootSetupHash(t, sub)
	c.registry.heldSetup("w1", rootHash, true)

	cl, err := oneshot.New(conn("client"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec, err := cl.Run(ctx, sub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a: done: a\nb: done: b"; rec.Status != event.Succeeded || rec.Output != want {
		t.Fatalf("run: %s %q, output %q, want %q", rec.Status, rec.Error, rec.Output, want)
	}

	// The observer's copies may trail the run's end: wait for the four
	// requests (the root twice, each helper once).
	for range 4 {
		select {
		case <-seen:
		case <-ctx.Done():
			t.Fatal("the observer saw fewer than four placements")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	byThread := map[string][]wire.ExecRequest{}
	var order []string
	for _, req := range placed {
		if byThread[req.Thread.ID] == nil {
			order = append(order, req.Thread.ID)
		}
		byThread[req.Thread.ID] = append(byThread[req.Thread.ID], req)
	}
	if len(order) != 3 {
		t.Fatalf("placements of %d threads, want 3 (root, a, b)", len(order))
	}
	rootReqs := byThread[order[0]]
	if len(rootReqs) != 2 || rootReqs[0].Setup != nil || rootReqs[0].SetupHash != rootHash || rootReqs[1].Setup == nil ||
		rootReqs[1].Token != rootReqs[0].Token {
		t.Errorf("root placed %d times (want by hash, then once more with the setup, same placement): %+v", len(rootReqs), rootReqs)
	}
	first, second := byThread[order[1]], byThread[order[2]]
	if len(first) != 1 || first[0].Setup == nil {
		t.Errorf("first helper: %d requests, setup sent %v; want one, with the setup", len(first), len(first) == 1 && first[0].Setup != nil)
	}
	if len(second) != 1 || second[0].Setup != nil || second[0].SetupHash != first[0].SetupHash {
		t.Errorf("second helper: %d requests; want one, by the hash its sibling's setup came under", len(second))
	}
}

// TestSetupMissingIsBounded: a worker that answers setup_missing even to the
// request that carried the setup does not make the coordinator send it
// again and again: the thread fails after that one resend, saying why.
func TestSetupMissingIsBounded(t *testing.T) {
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	c, conn := startOnNATS(t, ctx)

	// A worker that never keeps a setup.
	rogue := conn("rogue")
	var mu sync.Mutex
	var placed []wire.ExecRequest
	if _, err := rogue.Subscribe(wire.SubjectExec("rogue"), func(m *nats.Msg) {
		var req wire.ExecRequest
		if err := wire.DecodeAs(m.Data, wire.TypeExecRequest, &req); err != nil {
			t.Errorf("exec request: %v", err)
			return
		}
		mu.Lock()
		placed = append(placed, req)
		mu.Unlock()
		m.Respond(wire.MustEncode(wire.TypeExecSetupMissing, wire.ExecSetupMissing{Worker: "rogue", SetupHash: req.SetupHash}))
	}); err != nil {
		t.Fatal(err)
	}
	hb := wire.MustEncode(wire.TypeWorkerHeartbeat, wire.WorkerHeartbeat{ID: "rogue", Slots: 4, Started: time.Now(), Interval: time.Minute})
	if err := rogue.Publish(wire.SubjectWorkerHeartbeat("rogue"), hb); err != nil {
		t.Fatal(err)
	}
	if err := rogue.Flush(); err != nil {
		t.Fatal(err)
	}
	for len(c.Workers()) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the worker never registered")
		case <-time.After(10 * time.Millisecond):
		}
	}

	a := spec.Default().Agent
	a.Model = providers.Sim
	sub := wire.RunSubmit{RunID: uuid.NewString(), Task: "hello", Agent: a, Cwd: t.TempDir()}
	rootHash := rootSetupHash(t, sub)
	c.registry.heldSetup("rogue", rootHash, true)

	cl, err := oneshot.New(conn("client"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec, err := cl.Run(ctx, sub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "worker rogue did not take the thread's setup"; rec.Status != event.Failed || rec.Error != want {
		t.Errorf("run: %s %q, want failed %q", rec.Status, rec.Error, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(placed) != 2 || placed[0].Setup != nil || placed[1].Setup == nil {
		t.Errorf("%d requests; want 2: by hash, then with the setup", len(placed))
	}
}
