package embedded

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// The attacks of issue 35 part 5, replayed on the secured stack: a real
// embedded NATS server in operator mode, every party on credentials of its
// own role (docs/security.md, "Attacks replayed").

// gatedModels opens "test:gated" as the sim model whose calls wait until
// gate is closed (or their context ends), and every other ref as usual.
func gatedModels(gate <-chan struct{}) runner.ModelOpener {
	return runner.ModelOpenerFunc(func(ref string) (model.Model, error) {
		if ref != "test:gated" {
			return providers.Open(ref)
		}
		sim, err := providers.Open(providers.Sim)
		if err != nil {
			return nil, err
		}
		return modelFunc(func(ctx context.Context, req model.Request) (model.Response, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return model.Response{}, ctx.Err()
			}
			return sim.Generate(ctx, req)
		}), nil
	})
}

// modelFunc is a model.Model of one function.
type modelFunc func(context.Context, model.Request) (model.Response, error)

func (f modelFunc) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	return f(ctx, req)
}

// journalBytes reads run's journal on a client's own connection, as a
// transcript does, and returns the entries that count and the bytes the
// read took from NATS.
func journalBytes(t *testing.T, s *Stack, run string) (entries int, bytes uint64) {
	t.Helper()
	nc, err := s.ConnectAs(auth.Client, "reader", "reader")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, nc, store.Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	before := nc.Stats().InBytes
	threads, err := st.ReadRunJournal(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, tj := range threads {
		entries += len(tj.Entries)
	}
	return entries, nc.Stats().InBytes - before
}

// TestAttackJournalFlood replays a worker credential (mallory, placed on
// nothing) writing 40 MB into the journal of runs it never hosted, in
// 100 KiB messages: 20 MB on a finished run's root thread, 20 MB on threads
// the run does not have, and a running run's root. On the root's own
// subject the stream refuses every write past the per-thread limit with
// "maximum messages per subject exceeded"; the threads the run does not
// have are never read, and what was planted on the root is skipped
// unread: reading the run's journal back (the API's transcripts, a
// resume's replay) returns the same entries and takes no more from NATS
// than the limit lets the root's subject hold. The running run's root,
// whose journal mallory filled, fails at its next write with the error
// naming the limit, instead of going on with a journal that keeps nothing.
func TestAttackJournalFlood(t *testing.T) {
	const perThread = 64
	gate := make(chan struct{})
	s, cl := startSecuredWith(t, func(c *Config) {
		c.Store.JournalMaxThreadMsgs = perThread
		c.Models = gatedModels(gate)
	})
	victim := simSubmit(t, "Plan:\n- a\n- b", 0, limits.Config{})
	if rec := runAsync(t, context.Background(), cl, victim, nil)(); rec.Status != event.Succeeded {
		t.Fatalf("victim run: %s (%s)", rec.Status, rec.Error)
	}
	entries, clean := journalBytes(t, s, victim.RunID)

	// A run whose root is in its first model call while mallory writes.
	running := simSubmit(t, "Plan:\n- a\n- b", 0, limits.Config{})
	running.Agent.Model = "test:gated"
	runningRoot, wait := startedRoot(t, cl, running)

	mallory, err := s.ConnectAs(auth.Worker, "mallory", "mallory")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(mallory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	chunk := []byte(strings.Repeat("m", 100<<10))
	flood := func(subject func(i int) string, total int) (stored, refused int) {
		t.Helper()
		var futures []jetstream.PubAckFuture
		for i := 0; i*len(chunk) < total; i++ {
			f, err := js.PublishMsgAsync(&nats.Msg{Subject: subject(i), Data: chunk,
				Header: nats.Header{store.HeaderPlacement: []string{journal.Digest("guessed")}}})
			if err != nil {
				t.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
				stored++
			case err := <-f.Err():
				var api *jetstream.APIError
				if !errors.As(err, &api) || !strings.Contains(api.Description, "maximum messages per subject exceeded") {
					t.Fatalf("a write was refused with %v, want the per-subject limit", err)
				}
				refused++
			case <-ctx.Done():
				t.Fatal("no answer to mallory's writes")
			}
		}
		return stored, refused
	}
	root := journal.RootID(victim.RunID)
	stored, refused := flood(func(int) string { return store.SubjectJournal(victim.RunID, root, false) }, 20<<20)
	if refused == 0 || stored >= perThread {
		t.Errorf("20 MB on the victim's root: %d writes stored, %d refused; want the limit of %d to refuse the rest", stored, refused, perThread)
	}
	invented, refusedElsewhere := flood(func(i int) string {
		return store.SubjectJournal(victim.RunID, fmt.Sprintf("invented-%d", i), false)
	}, 20<<20)
	if refusedElsewhere != 0 {
		t.Errorf("%d writes on invented threads refused", refusedElsewhere)
	}
	t.Logf("mallory: %d writes stored and %d refused on the root, %d stored on invented threads", stored, refused, invented)

	after, read := journalBytes(t, s, victim.RunID)
	if after != entries {
		t.Errorf("the victim's journal reads back %d entries, %d before the flood", after, entries)
	}
	// The root's subject holds at most perThread messages of 100 KiB.
	if bound := uint64(perThread*len(chunk) + 64<<10); read-clean > bound {
		t.Errorf("reading the victim's journal took %d bytes, %d before the flood; want at most %d more", read, clean, bound)
	}
	t.Logf("reading the victim's journal: %d bytes before the flood, %d after 40 MB were written into it", clean, read)

	// The running root's journal, full: its next write is refused.
	flood(func(int) string { return store.SubjectJournal(running.RunID, runningRoot, false) }, (perThread+1)*len(chunk))
	close(gate)
	rec := wait()
	t.Logf("the run whose journal mallory filled: %s: %s", rec.Status, rec.Error)
	if rec.Status != event.Failed || !strings.Contains(rec.Error, "journal limit reached") || !strings.Contains(rec.Error, "--journal-max-thread-msgs") {
		t.Errorf("the run whose journal was filled: %s %q; want failed naming the journal's limit", rec.Status, rec.Error)
	}
}

// startedRoot runs sub and returns, once its root thread runs, the root's
// id and the wait for the run's record.
func startedRoot(t *testing.T, cl *oneshot.Client, sub wire.RunSubmit) (root string, wait func() record.Run) {
	t.Helper()
	roots := make(chan string, 1)
	events := event.SinkFunc(func(e event.Event) {
		if e.Type == event.ThreadStarted && e.Depth == 0 {
			select {
			case roots <- e.ThreadID:
			default:
			}
		}
	})
	w := runAsync(t, context.Background(), cl, sub, events)
	select {
	case root = <-roots:
	case <-time.After(runTimeout):
		t.Fatal("the root thread did not start")
	}
	return root, w
}

// TestAttackFanOut replays a model response of 28,000 agent calls (a
// 240 KB task the sim model splits into one helper per line) on the
// secured, durable stack with the default cap on a turn's tool calls:
// only the first runner.DefaultMaxToolCalls calls run (spawned, or refused
// by the run's limits), every later one is answered with the cap's error
// and spawns nothing, and the run ends succeeded. Measured with this test
// (heap and stacks in use by the coordinator, both workers and the NATS
// server together, sampled every 5 ms): without the cap, 315 to 481 MB at
// the peak over three runs, each failed on its root's journal limit; with
// it, 143 to 147 MB (docs/bounds.md). The test holds the growth under
// 320 MB, about twice what the cap lets it take.
func TestAttackFanOut(t *testing.T) {
	const calls, bound = 28_000, 320 << 20
	_, cl := startSecuredWith(t, nil)
	var task strings.Builder
	for i := range calls {
		fmt.Fprintf(&task, "- t%d\n", i)
	}
	start, stop := memoryPeak()
	rec := runAsync(t, context.Background(), cl, simSubmit(t, task.String(), 0, limits.Config{}), nil)()
	peak := stop()
	t.Logf("%d agent calls in one response: %s in %d threads, %d refusals; heap and stacks in use: %d MB at the start, %d MB at the peak",
		calls, rec.Status, len(rec.Threads), rec.Refusals.Threads+rec.Refusals.Depth+rec.Refusals.Budget, start>>20, peak>>20)
	if rec.Status != event.Succeeded {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	if ran := len(rec.Threads) - 1 + rec.Refusals.Threads + rec.Refusals.Depth + rec.Refusals.Budget; ran > runner.DefaultMaxToolCalls {
		t.Errorf("%d agent calls spawned or were refused by the limits; want at most the cap, %d", ran, runner.DefaultMaxToolCalls)
	}
	if n := strings.Count(rec.Output, runner.OverCapText(runner.DefaultMaxToolCalls)); n != calls-runner.DefaultMaxToolCalls {
		t.Errorf("%d calls answered with the cap's error, want %d", n, calls-runner.DefaultMaxToolCalls)
	}
	if peak-start > bound {
		t.Errorf("heap and stacks in use grew by %d MB, over the bound of %d MB", (peak-start)>>20, bound>>20)
	}
}

// memoryPeak starts sampling the heap and stacks in use; stop ends it and
// returns the peak. start is what was in use after a collection, at once.
func memoryPeak() (start uint64, stop func() (peak uint64)) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	start = m.HeapInuse + m.StackInuse
	done, out := make(chan struct{}), make(chan uint64)
	go func() {
		peak := start
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- peak
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse+m.StackInuse)
		}
	}()
	return start, func() uint64 { close(done); return <-out }
}

// TestAttackHungRuns replays runs stuck in a model call of an hour on a
// coordinator of two run slots (--max-runs 2) that holds at most one run
// beside them (--max-idle-runs 1), runs idle after 300 ms (--run-idle):
// two stuck runs give their slots back once idle, and a normal run queued
// behind them starts and succeeds while they still run. A third stuck run
// takes the last place a run may have; a normal run queued then waits in
// the queue (the coordinator holds no more runs) until a stuck run ends
// (here, cancelled), then starts and succeeds. The stuck runs run on,
// bounded by their deadline (TestDeadlinesFreeRunSlots in test/durable).
// Held to their slots (--run-idle 0, as before), a normal run queued behind
// two stuck runs is still queued two seconds later: it would wait for
// their deadline, an hour by default.
func TestAttackHungRuns(t *testing.T) {
	t.Run("idle runs give their slots back", func(t *testing.T) {
		q := startQueued(t, 300*time.Millisecond)
		stuck := []string{q.submit(true), q.submit(true)}
		for _, id := range stuck {
			q.waitFor(id, running, "running")
		}
		start := time.Now()
		normal := q.submit(false)
		if r := q.waitFor(normal, final, "finished"); r.Status != event.Succeeded {
			t.Fatalf("the run queued behind two hung runs: %s (%s)", r.Status, r.Error)
		}
		t.Logf("a run queued behind two hung runs on a coordinator of two run slots succeeded in %v", time.Since(start).Round(time.Millisecond))

		stuck = append(stuck, q.submit(true))
		q.waitFor(stuck[2], running, "running")
		held := q.submit(false)
		time.Sleep(2 * time.Second) // several idle periods: the coordinator holds all it may
		if r := q.status(held); r.Status != record.Queued {
			t.Fatalf("a run past the slots and the idle runs: %s, want it queued", r.Status)
		}
		for _, id := range stuck {
			if r := q.status(id); r.Status != event.Running {
				t.Fatalf("hung run %s: %s (%s), want it running still", id, r.Status, r.Error)
			}
		}
		q.cancel(stuck[0])
		if r := q.waitFor(held, final, "finished"); r.Status != event.Succeeded {
			t.Fatalf("the run queued once a hung run ended: %s (%s)", r.Status, r.Error)
		}
		for _, id := range stuck[1:] {
			q.cancel(id)
		}
	})
	t.Run("held to their slots", func(t *testing.T) {
		q := startQueued(t, -1)
		stuck := []string{q.submit(true), q.submit(true)}
		for _, id := range stuck {
			q.waitFor(id, running, "running")
		}
		normal := q.submit(false)
		time.Sleep(2 * time.Second)
		if r := q.status(normal); r.Status != record.Queued {
			t.Fatalf("a run behind two hung runs holding their slots: %s, want it queued", r.Status)
		}
		for _, id := range stuck {
			q.cancel(id)
		}
		if r := q.waitFor(normal, final, "finished"); r.Status != event.Succeeded {
			t.Fatalf("the run queued once the hung runs ended: %s (%s)", r.Status, r.Error)
		}
	})
}

func running(r record.Run) bool { return r.Status == event.Running }
func final(r record.Run) bool   { return r.Status.Final() }

// queuedRuns submits runs to the queue of a secured stack's coordinator of
// two run slots and one idle run, on a client's credentials.
type queuedRuns struct {
	t   *testing.T
	ctx context.Context
	svc *service.Service
}

// startQueued starts the stack, its runs idle after runIdle.
func startQueued(t *testing.T, runIdle time.Duration) *queuedRuns {
	s, _ := startSecuredWith(t, func(c *Config) {
		c.Coordinator.MaxRuns, c.Coordinator.MaxIdleRuns, c.Coordinator.RunIdle = 2, 1, runIdle
	})
	nc, err := s.ConnectAs(auth.Client, "submitter", "submitter")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, nc, store.Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Conn: nc, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return &queuedRuns{t: t, ctx: ctx, svc: svc}
}

// submit queues a run of the sim model; a stuck one's model calls take an
// hour each.
func (q *queuedRuns) submit(stuck bool) string {
	q.t.Helper()
	latency := 0
	if stuck {
		latency = int(time.Hour / time.Millisecond)
	}
	sub := simSubmit(q.t, "Plan:\n- a\n- b", latency, limits.Config{})
	if err := q.svc.Enqueue(q.ctx, sub); err != nil {
		q.t.Fatal(err)
	}
	return sub.RunID
}

func (q *queuedRuns) status(id string) record.Run {
	q.t.Helper()
	r, err := q.svc.GetRun(q.ctx, id)
	if err != nil {
		q.t.Fatal(err)
	}
	return r
}

// waitFor polls run id's record until ok says so.
func (q *queuedRuns) waitFor(id string, ok func(record.Run) bool, what string) record.Run {
	q.t.Helper()
	for {
		r := q.status(id)
		if ok(r) {
			return r
		}
		select {
		case <-q.ctx.Done():
			q.t.Fatalf("run %s: not %s: %s (%s)", id, what, r.Status, r.Error)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cancel cancels run id and waits for its end.
func (q *queuedRuns) cancel(id string) {
	q.t.Helper()
	if err := q.svc.CancelRun(q.ctx, id); err != nil {
		q.t.Fatal(err)
	}
	q.waitFor(id, final, "finished")
}
