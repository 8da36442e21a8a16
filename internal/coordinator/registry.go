package coordinator

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

type workerState struct {
	info     wire.WorkerInfo
	interval time.Duration
	// load is the threads this coordinator placed there that hold a slot:
	// placed, not finished, not parked on helpers.
	load int
	// hosted is the threads this coordinator placed there, parked ones
	// included; among equally loaded workers the one hosting fewer wins, so
	// a helper tends to land beside, not on top of, its waiting parent.
	hosted int
	// cooling keeps a worker that answered busy out of placement until its
	// next heartbeat says how loaded it really is.
	cooling bool
	// started names the worker's incarnation (its heartbeat's Started): a
	// worker restarted under the same id knows nothing of earlier placements.
	started time.Time
	// setups are the hashes of the thread setups the worker took:
	// placements there go without them.
	setups map[string]struct{}
}

// maxHeldSetups bounds what is remembered of one worker's setups.
const maxHeldSetups = 1024

// placing is what a placement on worker id needs to know of it: whether
// it took the setup of hash hash, its heartbeat period (a second if
// unknown) and its incarnation (its heartbeats' Started).
func (g *registry) placing(id, hash string) (held bool, interval time.Duration, started time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w, ok := g.workers[id]
	if !ok {
		return false, time.Second, time.Time{}
	}
	_, held = w.setups[hash]
	return held, w.interval, w.started
}

// heldSetup notes that worker id took the setup of hash hash, or, held
// false, that it does not hold it (any more).
func (g *registry) heldSetup(id, hash string, held bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w, ok := g.workers[id]
	switch {
	case !ok:
	case !held:
		delete(w.setups, hash)
	default:
		if w.setups == nil || len(w.setups) >= maxHeldSetups {
			w.setups = make(map[string]struct{})
		}
		w.setups[hash] = struct{}{}
	}
}

// registry tracks live workers and places threads on them: the least loaded
// by executing threads against slots, and when none has room, a FIFO queue of
// waiters served as capacity frees.
type registry struct {
	mu      sync.Mutex
	workers map[string]*workerState
	waiters list.List // of *waiter
	now     func() time.Time
}

// waiter is a thread queued for a slot.
type waiter struct {
	s    seeker
	need []string // MCP servers the thread names
	// Guarded by registry.mu: el is its place in the queue, nil once it
	// was served or gave up; wid is the worker it was handed.
	el      *list.Element
	wid     string
	timer   *time.Timer
	stopCtx func() bool
}

// stop ends the waiter's wait for its timeout and its context.
func (wt *waiter) stop() {
	wt.timer.Stop()
	wt.stopCtx()
}

var errNoCapacity = errors.New("no worker had a free slot")

func newRegistry(now func() time.Time) *registry {
	return &registry{workers: map[string]*workerState{}, now: now}
}

// heartbeat records a worker's heartbeat and reports whether it just joined.
func (g *registry) heartbeat(hb wire.WorkerHeartbeat) (joined bool) {
	g.mu.Lock()
	w, ok := g.workers[hb.ID]
	if !ok {
		w = &workerState{}
		g.workers[hb.ID] = w
	}
	w.info.ID, w.info.Host, w.info.Slots = hb.ID, hb.Host, hb.Slots
	w.info.Running, w.info.Parked, w.info.Draining = hb.Running, hb.Parked, hb.Draining
	w.info.LastSeen, w.info.Sandbox = g.now(), hb.Sandbox
	w.info.MCP = slices.Clone(hb.MCP)
	w.interval = hb.Interval
	if w.interval <= 0 {
		w.interval = time.Second
	}
	w.cooling = false
	if !w.started.Equal(hb.Started) {
		w.setups = nil // a new incarnation holds no setup yet
	}
	w.started = hb.Started
	served := g.dispatchLocked()
	g.mu.Unlock()
	g.hand(served)
	return !ok
}

// alive reports whether worker id, in the incarnation started, was heard
// from within missed heartbeat intervals.
func (g *registry) alive(id string, started time.Time, missed int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	w, ok := g.workers[id]
	return ok && w.started.Equal(started) && g.now().Sub(w.info.LastSeen) <= time.Duration(missed)*w.interval
}

// sweep forgets workers silent for missed heartbeats and returns their ids.
func (g *registry) sweep(missed int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	var lost []string
	for id, w := range g.workers {
		if now.Sub(w.info.LastSeen) > time.Duration(missed)*w.interval {
			delete(g.workers, id)
			lost = append(lost, id)
		}
	}
	return lost
}

// forget drops a worker found dead (no responders, silent on a call).
func (g *registry) forget(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.workers[id]
	delete(g.workers, id)
	return ok
}

// pickLocked returns the usable worker with the lowest load per slot
// among those that can host a thread naming the MCP servers need.
func (g *registry) pickLocked(need []string) *workerState {
	fit := g.fitLocked(need)
	var best *workerState
	for _, w := range g.workers {
		if w.info.Draining || w.cooling || w.load >= w.info.Slots || !fit(w) {
			continue
		}
		if best == nil || less(w, best) {
			best = w
		}
	}
	return best
}

// fitLocked is the rule for a thread that names MCP servers: while some
// live worker has them all, only such workers host it (it waits for one
// of them rather than run where its tools are missing); when none has,
// any worker does, and the worker fails the thread saying which server
// it lacks.
func (g *registry) fitLocked(need []string) func(*workerState) bool {
	has := func(w *workerState) bool {
		for _, n := range need {
			if !slices.Contains(w.info.MCP, n) {
				return false
			}
		}
		return true
	}
	if len(need) == 0 {
		return func(*workerState) bool { return true }
	}
	for _, w := range g.workers {
		if !w.info.Draining && has(w) {
			return has
		}
	}
	return func(*workerState) bool { return true }
}

// less orders workers for placement: lower load per slot, then fewer hosted
// threads, then id (for determinism).
func less(a, b *workerState) bool {
	la, lb := a.load*b.info.Slots, b.load*a.info.Slots
	if la != lb {
		return la < lb
	}
	if a.hosted != b.hosted {
		return a.hosted < b.hosted
	}
	return a.info.ID < b.info.ID
}

// A seeker is a thread that asks the registry for a slot (reserve). It
// waits as data, in the queue, not on a goroutine: a fan-out wider than the
// fleet holds its queued helpers as waiters, not as parked stacks.
type seeker interface {
	// waiting says the thread had to queue (no worker has a free slot, or
	// none is registered); called once, before reserve returns.
	waiting(workers int)
	// placed gives the queued thread its worker, or the reason none came
	// (its context ended, or the timeout passed); called once, on a
	// goroutine of its own, which may block.
	placed(wid string, err error)
}

// reserve reserves a slot on a worker for a thread that names the MCP
// servers need. It returns the worker when one has room and nobody waits
// before the thread; otherwise it queues the thread, returns "", and s
// hears where it was placed once a slot is handed to it, in arrival
// order, or why it was not, once ctx ends or timeout passes.
func (g *registry) reserve(ctx context.Context, timeout time.Duration, need []string, s seeker) string {
	g.mu.Lock()
	if g.waiters.Len() == 0 {
		if w := g.pickLocked(need); w != nil {
			w.load++
			w.hosted++
			id := w.info.ID // heartbeats rewrite info under the lock
			g.mu.Unlock()
			return id
		}
	}
	wt := &waiter{need: need, s: s}
	wt.el = g.waiters.PushBack(wt)
	workers := len(g.workers)
	// Before the waiter can be served: its timer and context are stopped
	// by whoever serves it.
	wt.timer = time.AfterFunc(timeout, func() { g.giveUp(wt, fmt.Errorf("%w within %v", errNoCapacity, timeout)) })
	wt.stopCtx = context.AfterFunc(ctx, func() { g.giveUp(wt, context.Cause(ctx)) })
	served := g.dispatchLocked() // waiters ahead may all be for busy MCP workers
	queued := wt.el != nil
	g.mu.Unlock()
	if queued {
		s.waiting(workers)
	}
	g.hand(served)
	return ""
}

// giveUp takes wt out of the queue, if it is still there, and tells its
// seeker why.
func (g *registry) giveUp(wt *waiter, cause error) {
	g.mu.Lock()
	queued := wt.el != nil
	if queued {
		g.waiters.Remove(wt.el)
		wt.el = nil
	}
	g.mu.Unlock()
	if queued {
		wt.stop()
		wt.s.placed("", cause)
	}
}

// release frees a reservation made by reserve.
func (g *registry) release(id string) {
	g.mu.Lock()
	if w, ok := g.workers[id]; ok {
		w.load = max(0, w.load-1)
		w.hosted = max(0, w.hosted-1)
	}
	served := g.dispatchLocked()
	g.mu.Unlock()
	g.hand(served)
}

// dispatchLocked reserves free slots for waiters in arrival order and
// returns those it served, for hand once the lock is let go.
func (g *registry) dispatchLocked() (served []*waiter) {
	// A waiter for MCP servers whose workers are full lets the ones behind
	// it go first; any other waiter keeps its place at the front.
	for el := g.waiters.Front(); el != nil; {
		wt := el.Value.(*waiter)
		w := g.pickLocked(wt.need)
		if w == nil {
			if len(wt.need) == 0 {
				break
			}
			el = el.Next()
			continue
		}
		next := el.Next()
		w.load++
		w.hosted++
		g.waiters.Remove(el)
		wt.el, wt.wid = nil, w.info.ID
		served = append(served, wt)
		el = next
	}
	return served
}

// hand tells served waiters their workers, each on a goroutine of its own:
// what a seeker does next (send its request, or give the slot back) is not
// the releasing thread's to wait for.
func (g *registry) hand(served []*waiter) {
	for _, wt := range served {
		wt.stop()
		go wt.s.placed(wt.wid, nil)
	}
}

// busy takes a worker out of placement until its next heartbeat.
func (g *registry) busy(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w, ok := g.workers[id]; ok {
		w.cooling = true
	}
}

// park and unpark move a thread's slot out of and back into its worker's load
// while the thread waits on helpers; "" names no worker, and does nothing.
func (g *registry) park(id string) {
	g.mu.Lock()
	var served []*waiter
	if w, ok := g.workers[id]; ok && w.load > 0 {
		w.load--
		served = g.dispatchLocked()
	}
	g.mu.Unlock()
	g.hand(served)
}

func (g *registry) unpark(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w, ok := g.workers[id]; ok {
		w.load++
	}
}

// list returns the workers, sorted by id.
func (g *registry) list() []wire.WorkerInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]wire.WorkerInfo, 0, len(g.workers))
	for _, w := range g.workers {
		info := w.info
		info.Placed = w.load
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
