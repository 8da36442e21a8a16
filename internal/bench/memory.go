package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/wire"
)

// liveLatency keeps the memory scenario's helpers in their model call until
// the run is cancelled.
const liveLatency = time.Hour

// Worker process names of the memory scenario. Placement breaks ties by
// worker id, so the root lands on the parent's worker ("a-…" sorts first),
// and helpers go to the helpers' workers: the parent's one slot is taken by
// at most one helper while the root waits.
const (
	parentWorkers = "a-parent"
	helperWorkers = "b-helpers"
)

// memory measures each side's bytes per live helper and per parked parent,
// the coordinator, the parent's worker and the helpers' workers each in a
// child process of its own. Each of the two measurements starts fresh
// processes: a process that has run many goroutines keeps their freed stacks
// cached, and new goroutines reuse them without growing StackInuse.
func (b *suite) memory(ctx context.Context, res *Result) error {
	set := b.set
	// The client side of a cluster whose coordinator and workers are the
	// child processes of each phase.
	c := &cluster{}
	defer c.stop()
	var err error
	if c.srv, err = startServer(ctx, true, ""); err != nil {
		return err
	}
	if err = c.attach(c.srv.Connect("bench-memory")); err != nil {
		return err
	}

	n := set.MemoryHelpers
	b.logf("   %d live helpers", n)
	base, live, err := b.memPhase(ctx, c, listTask(n), liveLatency, limits.Config{MaxThreads: n}, 1, n, n+1)
	if err != nil {
		return err
	}
	// The parent's worker hosts the root and at most one helper.
	onParent := live.parent.Hosted - 1
	mem := &Memory{Helpers: n, Parents: set.MemoryParents, Workers: set.Workers,
		Coordinator: side(base.coord, live.coord, n, 0, 0),
		Worker:      side(base.helpers, live.helpers, live.helpers.Hosted, 0, 0)}
	mem.ParentWorker = side(base.parent, live.parent, n, onParent, mem.Worker.BytesPerLiveHelper)

	// Parked parents: P parents, each waiting on one helper. Subtract the
	// helpers, and the root's calls to the parents, at the costs just
	// measured.
	p := set.MemoryParents
	b.logf("   %d parked parents", p)
	var task strings.Builder
	for i := range p {
		fmt.Fprintf(&task, "- parent %d\n  - leaf %d\n", i, i)
	}
	base, park, err := b.memPhase(ctx, c, task.String(), set.ParkLatency, limits.Config{MaxThreads: 2 * p}, 2, p, 2*p+1)
	if err != nil {
		return err
	}
	perP := func(base, now memReport) float64 { return (float64(now.bytes()) - float64(base.bytes())) / float64(p) }
	mem.Coordinator.BytesPerParkedParent = ptr(round(perP(base.coord, park.coord)-mem.Coordinator.BytesPerLiveHelper, 0))
	workers := perP(base.parent, park.parent) + perP(base.helpers, park.helpers)
	mem.Worker.BytesPerParkedParent = ptr(round(workers-mem.Worker.BytesPerLiveHelper-mem.ParentWorker.BytesPerLiveHelper, 0))

	res.Memory = mem
	res.WorkerBytesPerLiveHelper = ptr(mem.Worker.BytesPerLiveHelper)
	res.CoordBytesPerLiveHelper = ptr(mem.Coordinator.BytesPerLiveHelper)
	return nil
}

// memPhase starts a coordinator, the parent's worker and the helpers'
// workers as child processes on c's server, warms them up with a small run,
// reads their memory (base), then reads it again while a run of task holds
// want threads at depth (now; see cluster.holding), and stops them.
func (b *suite) memPhase(ctx context.Context, c *cluster, task string, latency time.Duration,
	lim limits.Config, depth, want, hosted int) (base, now memSnap, err error) {
	set := b.set
	id := strings.ReplaceAll(uuid.NewString(), "-", "")
	most := max(set.MemoryHelpers, 2*set.MemoryParents) + 2
	slots := (most + set.Workers - 1) / set.Workers
	for _, p := range []struct {
		role, name     string
		workers, slots int
	}{
		{RoleCoordinator, RoleCoordinator, 0, 0},
		{RoleWorkers, parentWorkers, 1, 1},
		{RoleWorkers, helperWorkers, set.Workers, slots},
	} {
		ch, err := b.startChild(ctx, p.role, p.name, c.srv.ClientURL(), id, p.workers, p.slots)
		if err != nil {
			return base, now, err
		}
		defer ch.stop()
	}
	m := &memProbe{nc: c.nc, id: id}
	if err := m.await(ctx, 30*time.Second, "workers registered", func(s memSnap) bool { return s.coord.Workers == set.Workers+1 }); err != nil {
		return base, now, err
	}
	// Warm up: open the model and the harness, fill the pools.
	if _, err := c.run(ctx, runOpts{task: listTask(20), agent: rootAgent(true, 0)}); err != nil {
		return base, now, fmt.Errorf("warm-up: %w", err)
	}
	if base, err = m.all(); err != nil {
		return base, now, err
	}
	now, err = c.holding(ctx, m, task, latency, lim, depth, want, hosted)
	return base, now, err
}

// side is one process's growth from base to now over n helpers, less
// others helpers at otherCost each.
func side(base, now memReport, n, others int, otherCost float64) Side {
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(max(n, 1)) }
	less := float64(others) * otherCost / float64(max(n, 1))
	heapShare := 1.0
	if d := float64(now.bytes()) - float64(base.bytes()); d > 0 {
		heapShare = (float64(now.Heap) - float64(base.Heap)) / d
	}
	return Side{
		BaseBytes:           base.bytes(),
		BytesPerLiveHelper:  round(per(base.bytes(), now.bytes())-less, 0),
		HeapPerHelper:       round(per(base.Heap, now.Heap)-less*heapShare, 0),
		StackPerHelper:      round(per(base.Stack, now.Stack)-less*(1-heapShare), 0),
		GoroutinesPerHelper: round(float64(now.Goroutines-base.Goroutines)/float64(max(n, 1)), 2),
	}
}

// memSnap is every process's report at one moment.
type memSnap struct{ coord, parent, helpers memReport }

// memProbe asks the role processes for their memory.
type memProbe struct {
	nc *nats.Conn
	id string
}

func (m *memProbe) ask(role string) (memReport, error) {
	msg, err := m.nc.Request(controlSubject(m.id, role), nil, time.Minute)
	if err != nil {
		return memReport{}, fmt.Errorf("%s memory report: %w", role, err)
	}
	var r memReport
	err = json.Unmarshal(msg.Data, &r)
	return r, err
}

func (m *memProbe) all() (s memSnap, err error) {
	if s.coord, err = m.ask(RoleCoordinator); err != nil {
		return
	}
	if s.parent, err = m.ask(parentWorkers); err != nil {
		return
	}
	s.helpers, err = m.ask(helperWorkers)
	return
}

// await polls the reports until ok or timeout.
func (m *memProbe) await(ctx context.Context, timeout time.Duration, what string, ok func(memSnap) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		s, err := m.all()
		if err != nil {
			return err
		}
		if ok(s) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready: %s after %v (%+v)", what, timeout, s)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// holding submits a run whose helpers wait latency in the model, waits until
// want threads at depth have started and the workers host hosted threads,
// reads both sides' memory, then cancels the run and waits for its end. It
// fails if a thread at depth ended before the reading: then the threads
// above it were not all still waiting.
func (c *cluster) holding(ctx context.Context, m *memProbe, task string, latency time.Duration, lim limits.Config,
	depth, want, hosted int) (snap memSnap, err error) {
	runID := uuid.NewString()
	var started, finished atomic.Int64
	sub, err := c.nc.Subscribe(wire.SubjectEvents(runID)+".thread.*", func(msg *nats.Msg) {
		e, err := event.Unmarshal(msg.Data)
		if err != nil || e.Depth != depth {
			return
		}
		switch e.Type {
		case event.ThreadStarted:
			started.Add(1)
		case event.ThreadFinished:
			finished.Add(1)
		}
	})
	if err != nil {
		return
	}
	defer sub.Unsubscribe()
	sub.SetPendingLimits(-1, -1)
	if err = c.nc.Flush(); err != nil {
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var rec record.Run
	var runErr error
	wg.Go(func() {
		rec, runErr = c.client.Run(runCtx, wire.RunSubmit{RunID: runID, Task: task, Agent: rootAgent(true, latency),
			Limits: lim, Cwd: c.cwd}, nil, nil)
	})
	defer wg.Wait()

	timeout := 2*time.Minute + time.Duration(want)*5*time.Millisecond
	err = m.await(ctx, timeout, fmt.Sprintf("%d threads at depth %d started", want, depth), func(s memSnap) bool {
		return started.Load() >= int64(want) && s.parent.Hosted+s.helpers.Hosted >= hosted
	})
	if err == nil {
		time.Sleep(100 * time.Millisecond) // let replies and events in flight land
		snap, err = m.all()
	}
	if err == nil && finished.Load() > 0 {
		err = fmt.Errorf("%d threads at depth %d ended before the reading: latency %v too short for this machine", finished.Load(), depth, latency)
	}
	cancel()
	wg.Wait()
	if err == nil && runErr != nil {
		err = fmt.Errorf("cancelling the run: %w", runErr)
	}
	if err == nil && rec.Status != event.Cancelled {
		err = fmt.Errorf("run ended %s, want cancelled: %s", rec.Status, rec.Error)
	}
	return
}
