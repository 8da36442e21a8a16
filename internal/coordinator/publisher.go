package coordinator

import (
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
)

// The coordinator publishes every event through one ordered queue, so the
// work of publishing (JSON, a NATS publish and its header per event) is done
// off the paths that produce events: a placement's replies are handled on
// the transport's delivery goroutine, and a spawn's admission answers its
// parent; neither waits for its events to be written.
//
// Order is kept: events leave in the order they were queued, whoever queued
// them, so a thread's relayed events go before the thread.finished the
// coordinator queues after them, and a run's events before its
// run.finished. A run's end waits (flush) until its run.finished is handed
// to NATS, and stored in the events stream when there is one, before the
// run's record is final, so what a submitter sees when it gets the record
// is every event of the run sent, and kept.
//
// The queue is bounded (maxQueuedEvents waiting, and as many again taken
// out as the batch being sent): when it is full, the one queuing waits for
// room, as it waited for its own publish before the queue was there, so a
// flood of events slows its producers instead of growing memory without
// bound, and nothing is dropped. The events stream holds it back the same
// way: a batch is taken only once the last one is stored (or storedWait
// passed).
//
// Events are sent in batches: once woken, the goroutine waits publishDelay
// for more before it sends what came (a flush does not wait), so a busy
// coordinator wakes it once per batch instead of once per event, and does
// not take a core from the spawn path for every event it relays.
//
// A goroutine runs only while events come: it ends once the queue has been
// empty for publisherLinger, so a coordinator with nothing to publish holds
// none, and a busy one keeps the same goroutine (and its grown stack).

// maxQueuedEvents bounds the events waiting to be published.
const maxQueuedEvents = 8192

// publisherLinger is how long the publishing goroutine waits for more
// events before it ends.
const publisherLinger = time.Second

// publishDelay is how long queued events wait for more to go with them.
const publishDelay = time.Millisecond

// flushTimeout bounds how long a run's end waits for its events to go.
const flushTimeout = 5 * time.Second

// queued is an event waiting, or a flush marker (done set) closed once
// everything queued before it has been published.
type queued struct {
	e    event.Event
	done chan struct{}
}

// publisher is the ordered, bounded queue of events to publish.
type publisher struct {
	send func(*event.Event) // publishes one event; called by one goroutine at a time
	// stored, when set, waits until what send took is kept (the events
	// stream): called after each batch and before a flush is done, by the
	// same goroutine. A full stream thus holds the queue back, and a flush
	// means stored.
	stored func()
	max    int

	mu      sync.Mutex
	room    sync.Cond // signalled when the queue has room again
	items   []queued
	spare   []queued // the drained batch's slice, for reuse
	running bool     // a goroutine drains the queue
	wake    chan struct{}
	hurry   chan struct{} // a flush is queued: the batch goes now
}

func newPublisher(max int, send func(*event.Event), stored func()) *publisher {
	if stored == nil {
		stored = func() {}
	}
	p := &publisher{send: send, stored: stored, max: max, wake: make(chan struct{}, 1), hurry: make(chan struct{}, 1)}
	p.room.L = &p.mu
	return p
}

// put queues e, waiting for room while the queue is full.
func (p *publisher) put(e event.Event) {
	p.enqueue(queued{e: e})
}

// flush waits until every event queued before it has been published (and
// stored, with a store), or until timeout; false means it gave up.
func (p *publisher) flush(timeout time.Duration) bool {
	done := make(chan struct{})
	p.enqueue(queued{done: done})
	select {
	case p.hurry <- struct{}{}:
	default:
	}
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// enqueue adds q at the queue's end, and wakes the goroutine that drains
// the queue, or starts one when none runs.
func (p *publisher) enqueue(q queued) {
	p.mu.Lock()
	for len(p.items) >= p.max {
		p.room.Wait()
	}
	p.items = append(p.items, q)
	start := !p.running
	p.running = true
	p.mu.Unlock()
	if start {
		go p.drain()
		return
	}
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// drain publishes what is queued, batch by batch, and ends once nothing
// has come for publisherLinger.
func (p *publisher) drain() {
	idle := time.NewTimer(publisherLinger)
	defer idle.Stop()
	for {
		idle.Reset(publishDelay)
		select {
		case <-idle.C:
		case <-p.hurry:
		}
		p.mu.Lock()
		batch := p.items
		if len(batch) == 0 {
			p.mu.Unlock()
			idle.Reset(publisherLinger)
			select {
			case <-p.wake:
				continue
			case <-idle.C:
			}
			p.mu.Lock()
			if len(p.items) == 0 {
				p.running = false
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			continue
		}
		p.items, p.spare = p.spare[:0], nil
		p.room.Broadcast()
		p.mu.Unlock()
		for i := range batch {
			q := &batch[i]
			if q.done != nil {
				p.stored()
				close(q.done)
			} else {
				p.send(&q.e)
			}
			*q = queued{} // let the event's strings go
		}
		p.stored()
		p.mu.Lock()
		if p.spare == nil && cap(batch) <= 2*p.max {
			p.spare = batch[:0]
		}
		p.mu.Unlock()
	}
}
