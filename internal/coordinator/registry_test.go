package coordinator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// place reserves a slot on a worker, waiting in line up to timeout when there
// is no room anywhere.
func (g *registry) place(ctx context.Context, timeout time.Duration) (string, error) {
	return g.placeFor(ctx, timeout, nil)
}

// placeFor is place for a thread that names the MCP servers need.
func (g *registry) placeFor(ctx context.Context, timeout time.Duration, need []string) (string, error) {
	s := make(chanSeeker, 1)
	if wid := g.reserve(ctx, timeout, need, s); wid != "" {
		return wid, nil
	}
	p := <-s
	return p.wid, p.err
}

// chanSeeker waits for its slot on a channel.
type chanSeeker chan placedOn

// placedOn is what a seeker is told: its worker, or why none came.
type placedOn struct {
	wid string
	err error
}

func (chanSeeker) waiting(int) {}

func (s chanSeeker) placed(wid string, err error) { s <- placedOn{wid, err} }

func hb(id string, slots int) wire.WorkerHeartbeat {
	return wire.WorkerHeartbeat{ID: id, Slots: slots, Interval: time.Second}
}

func TestPlaceLeastLoadedThenSpread(t *testing.T) {
	g := newRegistry(time.Now)
	g.heartbeat(hb("a", 2))
	g.heartbeat(hb("b", 4))
	ctx := context.Background()
	var got []string
	for range 6 {
		id, err := g.place(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	// a: 1/2 after one; b fills proportionally to its slots.
	want := map[string]int{"a": 2, "b": 4}
	count := map[string]int{}
	for _, id := range got {
		count[id]++
	}
	if count["a"] != want["a"] || count["b"] != want["b"] {
		t.Fatalf("placements %v", got)
	}
	if _, err := g.place(ctx, 20*time.Millisecond); !errors.Is(err, errNoCapacity) {
		t.Fatalf("full fleet: %v", err)
	}
}

func TestParkedParentFreesItsSlotAndHelperLandsBeside(t *testing.T) {
	g := newRegistry(time.Now)
	g.heartbeat(hb("a", 1))
	g.heartbeat(hb("b", 1))
	ctx := context.Background()
	parent, _ := g.place(ctx, time.Second)
	g.park(parent)
	child, err := g.place(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if child == parent {
		t.Fatalf("helper placed on its parked parent's worker %s while another was idle", child)
	}
	grandchild, err := g.place(ctx, time.Second)
	if err != nil || grandchild != parent {
		t.Fatalf("parked parent's slot not reusable: %v %v", grandchild, err)
	}
}

func TestWaitersServedInOrderAsCapacityFrees(t *testing.T) {
	g := newRegistry(time.Now)
	g.heartbeat(hb("a", 1))
	ctx := context.Background()
	first, _ := g.place(ctx, time.Second)
	order := make(chan int, 3)
	for i := range 3 {
		go func() {
			if _, err := g.place(ctx, 5*time.Second); err == nil {
				order <- i
				g.release("a")
			}
		}()
		// Let each waiter queue before the next.
		deadline := time.Now().Add(time.Second)
		for {
			g.mu.Lock()
			n := g.waiters.Len()
			g.mu.Unlock()
			if n == i+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	g.release(first)
	for want := range 3 {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("waiter %d served before %d", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiters not served")
		}
	}
}

func TestJoiningWorkerServesWaiter(t *testing.T) {
	g := newRegistry(time.Now)
	done := make(chan string, 1)
	go func() {
		id, _ := g.place(context.Background(), 5*time.Second)
		done <- id
	}()
	time.Sleep(10 * time.Millisecond)
	g.heartbeat(hb("late", 1))
	select {
	case id := <-done:
		if id != "late" {
			t.Fatalf("got %q", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not served by a joining worker")
	}
}

func TestBusyCoolsUntilHeartbeatAndSweepForgetsSilent(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	g := newRegistry(clock)
	g.heartbeat(hb("a", 4))
	g.busy("a")
	if _, err := g.place(context.Background(), 10*time.Millisecond); err == nil {
		t.Fatal("placed on a worker that just said busy")
	}
	g.heartbeat(hb("a", 4))
	id, err := g.place(context.Background(), time.Second)
	if err != nil || id != "a" {
		t.Fatalf("after heartbeat: %q %v", id, err)
	}
	now = now.Add(4 * time.Second)
	if lost := g.sweep(MissedHeartbeats); len(lost) != 1 || lost[0] != "a" {
		t.Fatalf("sweep = %v", lost)
	}
	if len(g.list()) != 0 {
		t.Fatal("lost worker still listed")
	}
}

func TestCancelledWaiterLeavesQueue(t *testing.T) {
	g := newRegistry(time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := g.place(ctx, time.Minute); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	g.heartbeat(hb("a", 1))
	if id, err := g.place(context.Background(), time.Second); err != nil || id != "a" {
		t.Fatalf("slot lost to a cancelled waiter: %q %v", id, err)
	}
}

func BenchmarkPlaceRelease(b *testing.B) {
	g := newRegistry(time.Now)
	for i := range 16 {
		g.heartbeat(hb(string(rune('a'+i)), 64))
	}
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id, err := g.place(ctx, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			g.release(id)
		}
	})
}

// TestQueuedWaitersLoseNoSlot races waiters that give up (timeout, cancel)
// against releases that hand them slots: every slot handed out is either
// taken or given back, none is held by a waiter that left.
func TestQueuedWaitersLoseNoSlot(t *testing.T) {
	g := newRegistry(time.Now)
	g.heartbeat(hb("a", 4))
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%3 == 0 {
				time.AfterFunc(time.Duration(i%7)*time.Millisecond, cancel)
			}
			id, err := g.place(ctx, time.Duration(1+i%5)*time.Millisecond)
			if err != nil {
				if !errors.Is(err, errNoCapacity) && !errors.Is(err, context.Canceled) {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			time.Sleep(time.Duration(i%3) * time.Millisecond)
			g.release(id)
		})
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.workers["a"]; w.load != 0 || w.hosted != 0 || g.waiters.Len() != 0 {
		t.Fatalf("after every waiter: load %d, hosted %d, %d queued", w.load, w.hosted, g.waiters.Len())
	}
}

// TestQueuedWaiterIsToldOnce: a thread that has to queue hears so once,
// before reserve returns, and then its slot once, off the releasing
// goroutine.
func TestQueuedWaiterIsToldOnce(t *testing.T) {
	g := newRegistry(time.Now)
	g.heartbeat(hb("a", 1))
	held, err := g.place(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := &countingSeeker{placedc: make(chan string, 2)}
	if wid := g.reserve(context.Background(), time.Minute, nil, s); wid != "" {
		t.Fatalf("full fleet reserved %q at once", wid)
	}
	if s.waited.Load() != 1 {
		t.Fatalf("told it waits %d times, want 1", s.waited.Load())
	}
	g.release(held)
	if id := <-s.placedc; id != "a" {
		t.Fatalf("placed on %q", id)
	}
	g.release("a")
	select {
	case id := <-s.placedc:
		t.Fatalf("told twice (%q)", id)
	case <-time.After(20 * time.Millisecond):
	}
	if s.waited.Load() != 1 {
		t.Fatalf("told it waits %d times, want 1", s.waited.Load())
	}
}

type countingSeeker struct {
	waited  atomic.Int32
	placedc chan string
}

func (s *countingSeeker) waiting(int) { s.waited.Add(1) }

func (s *countingSeeker) placed(wid string, err error) { s.placedc <- wid }
