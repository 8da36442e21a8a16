package quota

import (
	"container/list"
	"slices"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// waiter is one Take waiting for its share. Its caller's goroutine blocks
// on ready; the limiter grants it by setting ticket and closing ready.
type waiter struct {
	ask    model.Ask
	owner  string
	since  time.Time
	ready  chan struct{}
	ticket *Ticket
	thread *threadQueue
}

// fairQueue orders waiting calls round robin over runs, then round robin
// over the threads of a run, first come first served within a thread: a
// run with a few calls is served within a few grants of arriving however
// long another run's backlog is.
type fairQueue struct {
	runs  list.List // of *runQueue, in turn order
	turn  *list.Element
	byRun map[string]*runQueue
	n     int
}

type runQueue struct {
	name     string
	elem     *list.Element
	threads  list.List // of *threadQueue
	turn     *list.Element
	byThread map[string]*threadQueue
}

type threadQueue struct {
	name    string
	run     *runQueue
	elem    *list.Element
	waiters []*waiter
}

func (q *fairQueue) len() int { return q.n }

// push queues w last of its thread; a new thread or run joins the end of
// the turn order, so it is served after those already waiting had one turn.
func (q *fairQueue) push(w *waiter) {
	if q.byRun == nil {
		q.byRun = map[string]*runQueue{}
	}
	r := q.byRun[w.ask.Run]
	if r == nil {
		r = &runQueue{name: w.ask.Run, byThread: map[string]*threadQueue{}}
		r.elem = insertLast(&q.runs, q.turn, r)
		q.byRun[r.name] = r
		if q.turn == nil {
			q.turn = r.elem
		}
	}
	t := r.byThread[w.ask.Thread]
	if t == nil {
		t = &threadQueue{name: w.ask.Thread, run: r}
		t.elem = insertLast(&r.threads, r.turn, t)
		r.byThread[t.name] = t
		if r.turn == nil {
			r.turn = t.elem
		}
	}
	w.thread = t
	t.waiters = append(t.waiters, w)
	q.n++
}

// insertLast puts v just before turn (last in the round), or at the back.
func insertLast(l *list.List, turn *list.Element, v any) *list.Element {
	if turn == nil {
		return l.PushBack(v)
	}
	return l.InsertBefore(v, turn)
}

// head is the waiter whose turn it is, or nil.
func (q *fairQueue) head() *waiter {
	if q.turn == nil {
		return nil
	}
	r := q.turn.Value.(*runQueue)
	return r.turn.Value.(*threadQueue).waiters[0]
}

// pop removes the head, w, and passes the turn on, in its run and among
// runs.
func (q *fairQueue) pop(w *waiter) {
	t := w.thread
	r := t.run
	r.turn = next(&r.threads, t.elem)
	q.turn = next(&q.runs, r.elem)
	q.remove(w)
}

// remove takes w out wherever it is (its caller gave up).
func (q *fairQueue) remove(w *waiter) {
	t := w.thread
	if t == nil {
		return
	}
	i := slices.Index(t.waiters, w)
	if i < 0 {
		return
	}
	t.waiters = slices.Delete(t.waiters, i, i+1)
	w.thread = nil
	q.n--
	if len(t.waiters) > 0 {
		return
	}
	r := t.run
	if r.turn == t.elem {
		r.turn = next(&r.threads, t.elem)
	}
	r.threads.Remove(t.elem)
	delete(r.byThread, t.name)
	if r.threads.Len() > 0 {
		return
	}
	r.turn = nil
	if q.turn == r.elem {
		q.turn = next(&q.runs, r.elem)
	}
	q.runs.Remove(r.elem)
	delete(q.byRun, r.name)
	if q.runs.Len() == 0 {
		q.turn = nil
	}
}

// next is e's successor in the ring l, wrapping round; e itself when alone.
func next(l *list.List, e *list.Element) *list.Element {
	if n := e.Next(); n != nil {
		return n
	}
	return l.Front()
}
