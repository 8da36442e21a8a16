package coordinator

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
)

// sent records what a publisher sent, in order; the first send waits for
// hold to close when hold is set.
type sent struct {
	mu    sync.Mutex
	names []string
	hold  chan struct{}
}

func (s *sent) send(e *event.Event) {
	s.mu.Lock()
	first := len(s.names) == 0
	s.names = append(s.names, e.Name)
	s.mu.Unlock()
	if first && s.hold != nil {
		<-s.hold
	}
}

// settle lets the publishing goroutine's linger pass, so it ends before
// its bubble does.
func settle() { time.Sleep(2 * publisherLinger) }

func (s *sent) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

// TestPublisherKeepsOrder: events from several producers leave in the
// order each queued them, and a flush returns only once everything queued
// before it has been sent.
func TestPublisherKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s sent
		p := newPublisher(16, s.send, nil)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 100 {
					p.put(event.Event{Name: fmt.Sprintf("%d-%03d", w, i)})
				}
			})
		}
		wg.Wait()
		p.put(event.Event{Name: "last"})
		if !p.flush(time.Minute) {
			t.Fatal("flush gave up")
		}
		got := s.got()
		if len(got) != 401 || got[400] != "last" {
			t.Fatalf("sent %d events before the flush returned, the last %q; want 401, the last \"last\"", len(got), got[len(got)-1])
		}
		next := map[byte]int{}
		for _, n := range got[:400] {
			var w, i int
			fmt.Sscanf(n, "%d-%d", &w, &i)
			if i != next[n[0]] {
				t.Fatalf("producer %d's event %d sent when %d was due: %v", w, i, next[n[0]], got)
			}
			next[n[0]]++
		}
		settle()
	})
}

// TestPublisherBounded: with the sender stuck, the queue takes up to its
// bound; the next put waits (nothing is dropped, memory does not grow) and
// goes on once the sender does, in order.
func TestPublisherBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sent{hold: make(chan struct{})}
		p := newPublisher(4, s.send, nil)
		p.put(event.Event{Name: "e0"}) // taken by the sender, which is stuck
		time.Sleep(2 * publishDelay)
		synctest.Wait()
		for i := 1; i <= 4; i++ {
			p.put(event.Event{Name: fmt.Sprintf("e%d", i)}) // the queue's 4
		}
		over := make(chan struct{})
		go func() {
			p.put(event.Event{Name: "e5"})
			close(over)
		}()
		synctest.Wait()
		select {
		case <-over:
			t.Fatal("a put past the bound did not wait for room")
		default:
		}
		p.mu.Lock()
		queued := len(p.items)
		p.mu.Unlock()
		if queued != 4 {
			t.Fatalf("%d events queued, want the bound, 4", queued)
		}
		close(s.hold)
		<-over
		if !p.flush(time.Minute) {
			t.Fatal("flush gave up")
		}
		if diff := cmp.Diff([]string{"e0", "e1", "e2", "e3", "e4", "e5"}, s.got()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
		settle()
	})
}

// TestPublisherFlushBounded: a flush behind a sender that never returns
// gives up after its timeout instead of hanging the run's end.
func TestPublisherFlushBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sent{hold: make(chan struct{})}
		p := newPublisher(4, s.send, nil)
		p.put(event.Event{Name: "stuck"})
		if p.flush(time.Second) {
			t.Fatal("flush reported everything sent while the sender was stuck")
		}
		close(s.hold)
		if !p.flush(time.Minute) {
			t.Fatal("flush gave up once the sender went on")
		}
		settle()
	})
}

// TestPublisherGoroutineEnds: the publishing goroutine ends once the queue
// has been idle for publisherLinger, and a later event starts another.
func TestPublisherGoroutineEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s sent
		p := newPublisher(4, s.send, nil)
		p.put(event.Event{Name: "a"})
		time.Sleep(2 * publisherLinger)
		synctest.Wait()
		p.mu.Lock()
		running := p.running
		p.mu.Unlock()
		if running {
			t.Fatal("the publishing goroutine still runs after an idle linger")
		}
		p.put(event.Event{Name: "b"})
		if !p.flush(time.Minute) {
			t.Fatal("flush gave up")
		}
		if diff := cmp.Diff([]string{"a", "b"}, s.got()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
		settle()
	})
}

// TestPublisherBatches: events queued together wait publishDelay and go
// in one batch; a flush sends what waits without that delay.
func TestPublisherBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Duration
		start := time.Now()
		p := newPublisher(16, func(*event.Event) {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
		}, nil)
		for range 3 {
			p.put(event.Event{})
		}
		time.Sleep(2 * publishDelay)
		synctest.Wait()
		mu.Lock()
		if diff := cmp.Diff([]time.Duration{publishDelay, publishDelay, publishDelay}, at); diff != "" {
			t.Errorf("sent at (-want +got):\n%s", diff)
		}
		at = at[:0]
		mu.Unlock()
		start = time.Now()
		p.put(event.Event{})
		if !p.flush(time.Minute) {
			t.Fatal("flush gave up")
		}
		mu.Lock()
		if diff := cmp.Diff([]time.Duration{0}, at); diff != "" {
			t.Errorf("with a flush, sent at (-want +got):\n%s", diff)
		}
		mu.Unlock()
		settle()
	})
}
