package actor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/formica-run/formica/internal/actor/internal/ring"
)

// Mailbox run states. An actor holds a goroutine only while running: the
// sender that moves it from idle to running starts one, and that goroutine
// drains the mailbox, goes back to idle and re-checks for mail that raced it.
const (
	idle int32 = iota
	running
)

// envelope is one mailbox entry. sender and req are nil for a plain Send,
// so the common case allocates nothing beyond boxing msg.
type envelope struct {
	msg    any
	sender *PID
	req    *request
}

type request struct{ ch chan result }

type result struct {
	v   any
	err error
}

func (r *request) answer(v any, err error) {
	select {
	case r.ch <- result{v, err}:
	default: // answered already
	}
}

// actor is one mailbox with its receiver. Fields under mu are shared with
// senders; c and r belong to the running goroutine.
type actor struct {
	e      *Engine
	pid    PID
	r      Receiver
	size   int
	parent context.Context // nil: the engine's
	state  atomic.Int32
	c      Context // reused for every message

	mu       sync.Mutex
	q        ring.Ring[envelope]
	stopping bool // no more mail; Stopped comes after the queue drains
	finished bool // Stopped handed to Receive
	ctx      context.Context
	cancel   context.CancelCauseFunc
	gone     bool          // removed from the engine
	done     chan struct{} // made on demand by StopWait and Shutdown; closed when gone
}

func (a *actor) send(env envelope) error {
	a.mu.Lock()
	switch {
	case a.stopping:
		a.mu.Unlock()
		return fmt.Errorf("%s: stopping: %w", a.pid, ErrNoActor)
	case a.q.Len() >= a.size:
		a.mu.Unlock()
		return fmt.Errorf("%s: %w", a.pid, ErrMailboxFull)
	}
	a.q.Push(env)
	a.mu.Unlock()
	a.schedule()
	return nil
}

func (a *actor) stop() {
	a.mu.Lock()
	if a.stopping {
		a.mu.Unlock()
		return
	}
	a.stopping = true
	if a.cancel != nil {
		a.cancel(ErrStopped)
	}
	a.mu.Unlock()
	a.schedule()
}

func (a *actor) schedule() {
	if a.state.CompareAndSwap(idle, running) {
		go a.run()
	}
}

func (a *actor) run() {
	for {
		if a.drain() {
			return // Stopped delivered: the actor is gone, stay "running" forever
		}
		a.state.Store(idle)
		if !a.hasWork() || !a.state.CompareAndSwap(idle, running) {
			return
		}
	}
}

// drain handles mail until the mailbox is empty. It reports true once it
// has delivered Stopped and removed the actor.
func (a *actor) drain() bool {
	for {
		a.mu.Lock()
		env, ok := a.q.Pop()
		if !ok {
			last := a.stopping && !a.finished
			a.finished = a.finished || last
			a.mu.Unlock()
			if !last {
				return false
			}
			a.invoke(envelope{msg: Stopped{}})
			a.e.remove(a)
			a.mu.Lock()
			a.gone = true
			if a.done != nil {
				close(a.done)
			}
			a.mu.Unlock()
			return true
		}
		a.mu.Unlock()
		if a.invoke(env) {
			a.fail()
		}
	}
}

func (a *actor) hasWork() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.q.Len() > 0 || (a.stopping && !a.finished)
}

// invoke runs Receive for one envelope and reports whether it panicked.
// A request left unanswered gets ErrNoResponse, or ErrPanic.
func (a *actor) invoke(env envelope) (panicked bool) {
	c := &a.c
	c.env, c.responded = env, false
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			a.e.log.Error("actor panicked", "actor", a.pid.String(), "message", fmt.Sprintf("%T", env.msg), "panic", v)
			if env.req != nil && !c.responded {
				env.req.answer(nil, fmt.Errorf("%s: %w: %v", a.pid, ErrPanic, v))
			}
		}
		c.env = envelope{}
	}()
	a.r.Receive(c)
	if env.req != nil && !c.responded {
		env.req.answer(nil, fmt.Errorf("%s: %w", a.pid, ErrNoResponse))
	}
	return false
}

// fail stops an actor whose Receive panicked: mail still queued is dropped
// (requests among it fail at once) and Stopped follows.
func (a *actor) fail() {
	a.mu.Lock()
	var dropped []envelope
	for {
		env, ok := a.q.Pop()
		if !ok {
			break
		}
		dropped = append(dropped, env)
	}
	a.mu.Unlock()
	a.stop()
	for _, env := range dropped {
		if env.req != nil {
			env.req.answer(nil, fmt.Errorf("%s: stopped after panic: %w", a.pid, ErrNoActor))
		}
	}
	if len(dropped) > 0 {
		a.e.log.Warn("actor stopped after panic: dropped queued messages", "actor", a.pid.String(), "dropped", len(dropped))
	}
}

// context returns the actor's context, made on first use so idle actors
// that never ask for one do not pay for it.
func (a *actor) context() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil {
		parent := a.parent
		if parent == nil {
			parent = a.e.ctx
		}
		a.ctx, a.cancel = context.WithCancelCause(parent)
		if a.stopping {
			a.cancel(ErrStopped)
		}
	}
	return a.ctx
}

func (a *actor) doneChan() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done == nil {
		a.done = make(chan struct{})
		if a.gone {
			close(a.done)
		}
	}
	return a.done
}
