package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/client"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/wire"
)

// liveLatency keeps the memory scenario's helpers in their model call until
// the run is cancelled.
const liveLatency = time.Hour

// memory measures each side's bytes per live helper and per parked parent,
// the coordinator and the workers each in a child process of its own.
func (b *suite) memory(ctx context.Context, res *Result) error {
	set := b.set
	srv, err := startServer(ctx, true)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("bench-memory")
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, err := client.New(nc)
	if err != nil {
		return err
	}
	defer cl.Close()

	id := strings.ReplaceAll(uuid.NewString(), "-", "")
	most := max(set.MemoryHelpers, 2*set.MemoryParents) + 2
	slots := (most + set.Workers - 1) / set.Workers
	coord, err := b.startChild(ctx, RoleCoordinator, srv.ClientURL(), id, 0, 0)
	if err != nil {
		return err
	}
	defer coord.stop()
	workers, err := b.startChild(ctx, RoleWorkers, srv.ClientURL(), id, set.Workers, slots)
	if err != nil {
		return err
	}
	defer workers.stop()
	m := &memProbe{nc: nc, id: id}
	if err := m.await(ctx, 30*time.Second, "workers registered", func(c, _ memReport) bool { return c.Workers == set.Workers }); err != nil {
		return err
	}
	cwd, err := os.MkdirTemp("", "formica-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cwd)
	r := &memRunner{cl: cl, nc: nc, cwd: cwd}

	// Warm up: open the model and the harness, fill the pools.
	if err := r.complete(ctx, listTask(20)); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	baseC, baseW, err := m.both()
	if err != nil {
		return err
	}
	n := set.MemoryHelpers
	b.logf("   %d live helpers", n)
	liveC, liveW, err := r.holding(ctx, m, listTask(n), liveLatency, limits.Config{MaxThreads: n}, 1, n, n+1)
	if err != nil {
		return err
	}
	side := func(base, live memReport) Side {
		return Side{
			BaseBytes:           base.bytes(),
			BytesPerLiveHelper:  round((float64(live.bytes())-float64(base.bytes()))/float64(n), 0),
			HeapPerHelper:       round((float64(live.Heap)-float64(base.Heap))/float64(n), 0),
			StackPerHelper:      round((float64(live.Stack)-float64(base.Stack))/float64(n), 0),
			GoroutinesPerHelper: round(float64(live.Goroutines-base.Goroutines)/float64(n), 2),
		}
	}
	mem := &Memory{Helpers: n, Parents: set.MemoryParents, Workers: set.Workers,
		Coordinator: side(baseC, liveC), Worker: side(baseW, liveW)}

	// Parked parents: P parents, each waiting on one helper; subtract the
	// helpers at the per-helper cost just measured.
	if err := m.await(ctx, time.Minute, "helpers gone", func(_, w memReport) bool { return w.Hosted == 0 }); err != nil {
		return err
	}
	baseC, baseW, err = m.both()
	if err != nil {
		return err
	}
	p := set.MemoryParents
	b.logf("   %d parked parents", p)
	var task strings.Builder
	for i := range p {
		fmt.Fprintf(&task, "- parent %d\n  - leaf %d\n", i, i)
	}
	parkC, parkW, err := r.holding(ctx, m, task.String(), set.ParkLatency, limits.Config{MaxThreads: 2 * p}, 2, p, 2*p+1)
	if err != nil {
		return err
	}
	parked := func(s *Side, base, now memReport) {
		v := (float64(now.bytes()) - float64(base.bytes()) - float64(p)*s.BytesPerLiveHelper) / float64(p)
		s.BytesPerParkedParent = ptr(round(v, 0))
	}
	parked(&mem.Coordinator, baseC, parkC)
	parked(&mem.Worker, baseW, parkW)

	res.Memory = mem
	res.WorkerBytesPerLiveHelper = ptr(mem.Worker.BytesPerLiveHelper)
	res.CoordBytesPerLiveHelper = ptr(mem.Coordinator.BytesPerLiveHelper)
	return nil
}

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

func (m *memProbe) both() (coord, workers memReport, err error) {
	if coord, err = m.ask(RoleCoordinator); err != nil {
		return
	}
	workers, err = m.ask(RoleWorkers)
	return
}

// await polls both reports until ok or timeout.
func (m *memProbe) await(ctx context.Context, timeout time.Duration, what string, ok func(c, w memReport) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		c, w, err := m.both()
		if err != nil {
			return err
		}
		if ok(c, w) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s after %v (coordinator %+v, workers %+v)", errNotReady, what, timeout, c, w)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// memRunner submits the memory scenario's runs.
type memRunner struct {
	cl  *client.Client
	nc  *nats.Conn
	cwd string
}

func (r *memRunner) complete(ctx context.Context, task string) error {
	rec, err := r.cl.Run(ctx, wire.RunSubmit{RunID: uuid.NewString(), Task: task, Agent: rootAgent(true, 0), Cwd: r.cwd}, nil, nil)
	if err == nil && rec.Status != event.Succeeded {
		err = fmt.Errorf("run %s: %s", rec.Status, rec.Error)
	}
	return err
}

// holding submits a run whose helpers wait latency in the model, waits until
// want threads at depth have started and the workers host hosted threads,
// reads both sides' memory, then cancels the run and waits for its end. It
// fails if a thread at depth ended before the reading: then the threads
// above it were not all still waiting.
func (r *memRunner) holding(ctx context.Context, m *memProbe, task string, latency time.Duration, lim limits.Config,
	depth, want, hosted int) (coord, workers memReport, err error) {
	runID := uuid.NewString()
	var started, finished atomic.Int64
	sub, err := r.nc.Subscribe(wire.SubjectEvents(runID)+".thread.*", func(msg *nats.Msg) {
		var e event.Event
		if wire.DecodeAs(msg.Data, wire.TypeEvent, &e) != nil || e.Depth != depth {
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
	if err = r.nc.Flush(); err != nil {
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var rec record.Run
	var runErr error
	wg.Go(func() {
		rec, runErr = r.cl.Run(runCtx, wire.RunSubmit{RunID: runID, Task: task, Agent: rootAgent(true, latency),
			Limits: lim, Cwd: r.cwd}, nil, nil)
	})
	defer wg.Wait()

	timeout := 2*time.Minute + time.Duration(want)*5*time.Millisecond
	err = m.await(ctx, timeout, fmt.Sprintf("%d threads at depth %d started", want, depth), func(_, w memReport) bool {
		return started.Load() >= int64(want) && w.Hosted >= hosted
	})
	if err == nil {
		time.Sleep(100 * time.Millisecond) // let replies and events in flight land
		coord, workers, err = m.both()
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
