package embedded

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/wire"
)

// runTimeout bounds every run of these tests.
const runTimeout = 60 * time.Second

// startStack starts a coordinator and workers with short heartbeats, and a
// client on its own connection; both go at cleanup.
func startStack(t *testing.T, workers, slots int) (*Stack, *oneshot.Client) {
	t.Helper()
	return startStackWith(t, workers, slots, runner.ModelOpenerFunc(providers.Open))
}

// startStackWith is startStack with the workers' models opened by models.
func startStackWith(t *testing.T, workers, slots int, models runner.ModelOpener) (*Stack, *oneshot.Client) {
	t.Helper()
	return startStackOf(t, Config{Workers: workers, Slots: slots, Models: models})
}

// startStackOf starts the stack cfg describes, with the tests' heartbeat
// unless cfg names one, and --cwd, and a client of it.
func startStackOf(t *testing.T, cfg Config) (*Stack, *oneshot.Client) {
	t.Helper()
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 200 * time.Millisecond
	}
	cfg.Coordinator.Cwd = os.TempDir() // the runs' t.TempDir()s
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	nc, err := s.Connect("test-client")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := oneshot.New(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return s, cl
}

// simSubmit is a run of the default agent on the sim model, every model call
// taking latencyMS.
func simSubmit(t *testing.T, task string, latencyMS int, lim limits.Config) wire.RunSubmit {
	a := spec.Default().Agent
	a.Model = providers.Sim
	a.ModelArgs = model.Args{"latency_ms": latencyMS}
	return wire.RunSubmit{RunID: uuid.NewString(), Task: task, Agent: a, Limits: lim, Cwd: t.TempDir()}
}

// runAsync runs sub on cl until ctx ends; the returned function waits,
// bounded, for its record.
func runAsync(t *testing.T, ctx context.Context, cl *oneshot.Client, sub wire.RunSubmit, events event.Sink) func() record.Run {
	t.Helper()
	type result struct {
		rec record.Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := cl.Run(ctx, sub, events, nil)
		done <- result{rec, err}
	}()
	return func() record.Run {
		t.Helper()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("run: %v", r.err)
			}
			return r.rec
		case <-time.After(runTimeout):
			t.Fatalf("run did not end within %v", runTimeout)
			return record.Run{}
		}
	}
}

func TestFanOutRecordsEveryThread(t *testing.T) {
	s, cl := startStack(t, 2, 4)
	sub := simSubmit(t, "Plan:\n- a\n  - a1\n  - a2\n- b\n- c", 50, limits.Config{})
	rec := runAsync(t, context.Background(), cl, sub, nil)()

	want := "a: a1: done: a1\n  a2: done: a2\nb: done: b\nc: done: c"
	if rec.Status != event.Succeeded || rec.Output != want || rec.RunID != sub.RunID {
		t.Fatalf("run %s: status %q error %q output:\n%s\nwant:\n%s", rec.RunID, rec.Status, rec.Error, rec.Output, want)
	}
	byID := map[string]record.Thread{}
	for _, th := range rec.Threads {
		byID[th.ID] = th
	}
	names := map[string]string{} // thread name -> parent name
	for _, th := range rec.Threads {
		if th.Status != event.Succeeded || th.Worker == "" {
			t.Errorf("thread %s: status %q worker %q", th.Name, th.Status, th.Worker)
		}
		parent := "-"
		if th.ParentID != "" {
			p, ok := byID[th.ParentID]
			if !ok || p.Depth != th.Depth-1 {
				t.Errorf("thread %s (depth %d): parent %s not in the record one level up", th.Name, th.Depth, th.ParentID)
			}
			parent = p.Name
		}
		names[th.Name] = parent
	}
	wantTree := map[string]string{"formica": "-", "a": "formica", "a1": "a", "a2": "a", "b": "formica", "c": "formica"}
	if len(rec.Threads) != len(wantTree) {
		t.Errorf("%d threads in the record, want %d", len(rec.Threads), len(wantTree))
	}
	for name, parent := range wantTree {
		if names[name] != parent {
			t.Errorf("thread %s: parent %q, want %q", name, names[name], parent)
		}
	}
	if len(s.Workers) != 2 {
		t.Fatalf("%d workers", len(s.Workers))
	}
}

func TestThreadLimitRefusesPastTwo(t *testing.T) {
	_, cl := startStack(t, 2, 4)
	task := "Six jobs:\n- j1\n- j2\n- j3\n- j4\n- j5\n- j6"
	rec := runAsync(t, context.Background(), cl, simSubmit(t, task, 1000, limits.Config{MaxThreads: 2}), nil)()
	if rec.Status != event.Succeeded {
		t.Fatalf("status %q: %s", rec.Status, rec.Error)
	}
	done, refused := 0, 0
	for _, line := range strings.Split(rec.Output, "\n") {
		_, res, _ := strings.Cut(line, ": ")
		switch {
		case res == "Agent thread limit reached. Solve the task yourself.":
			refused++
		case strings.HasPrefix(res, "done: j"):
			done++
		default:
			t.Errorf("line %q", line)
		}
	}
	if done != 2 || refused != 4 || rec.Refusals.Threads != 4 || rec.Refusals.Depth != 0 || len(rec.Threads) != 3 {
		t.Errorf("%d done, %d refused in the output; record refusals %+v, %d threads; want 2, 4, 4 and 3",
			done, refused, rec.Refusals, len(rec.Threads))
	}
}

func TestCancelEndsRunAndFreesSlots(t *testing.T) {
	s, cl := startStack(t, 2, 4)
	var helpers atomic.Int32
	events := event.SinkFunc(func(e event.Event) {
		if e.Type == event.ThreadStarted && e.Depth > 0 {
			helpers.Add(1)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := simSubmit(t, "Slow:\n- s1\n- s2\n- s3\n- s4", 0, limits.Config{})
	sub.Agent.Helper.ModelArgs = model.Args{"latency_ms": 30_000} // only the helpers are slow
	wait := runAsync(t, ctx, cl, sub, events)

	deadline := time.Now().Add(runTimeout)
	for helpers.Load() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 helpers started within %v", helpers.Load(), runTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancelled := time.Now()
	cancel()
	rec := wait()
	if took := time.Since(cancelled); took > 10*time.Second {
		t.Errorf("the run took %v to end after its cancellation", took)
	}
	if rec.Status != event.Cancelled {
		t.Errorf("status %q (%s), want cancelled", rec.Status, rec.Error)
	}
	if len(rec.Threads) != 5 {
		t.Errorf("%d threads in the record, want 5", len(rec.Threads))
	}
	for _, th := range rec.Threads {
		if th.Status != event.Cancelled {
			t.Errorf("thread %s: status %q, want cancelled", th.Name, th.Status)
		}
	}
	waitWorkersIdle(t, s)
}

// waitWorkersIdle waits up to 10 s until no worker of s runs or hosts a
// thread.
func waitWorkersIdle(t *testing.T, s *Stack) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, w := range s.Workers {
		for w.Running() != 0 || w.Hosted() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("worker %s still runs %d and hosts %d threads", w.ID(), w.Running(), w.Hosted())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
