package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// DefaultMailboxSize bounds a mailbox when EngineConfig.MailboxSize is zero.
const DefaultMailboxSize = 64

// Receiver is an actor's behaviour. Receive runs for one message at a time,
// in mailbox order, never concurrently with itself.
type Receiver interface {
	Receive(c *Context)
}

// ReceiverFunc adapts a function to Receiver.
type ReceiverFunc func(c *Context)

// Receive calls f(c).
func (f ReceiverFunc) Receive(c *Context) { f(c) }

// Lifecycle messages, delivered through Receive like any other.
type (
	// Started is an actor's first message.
	Started struct{}
	// Stopped is an actor's last message, after everything sent before Stop.
	Stopped struct{}
)

// EngineConfig configures an Engine. Zero values mean defaults.
type EngineConfig struct {
	// Address is this process's address, carried in every PID the engine
	// hands out (e.g. the worker's NATS subject prefix).
	Address string
	// MailboxSize bounds each actor's mailbox; Send past it fails with
	// ErrMailboxFull. Default DefaultMailboxSize.
	MailboxSize int
	// Logger receives panics and lifecycle problems. Default: discard.
	Logger *slog.Logger
}

// Engine hosts actors in one process.
type Engine struct {
	addr        string
	mailboxSize int
	log         *slog.Logger
	ctx         context.Context // parent of every actor's context
	cancel      context.CancelCauseFunc

	mu     sync.RWMutex
	actors map[string]*actor
	closed bool
}

// NewEngine returns an empty engine. A non-positive MailboxSize means the default.
func NewEngine(cfg EngineConfig) *Engine {
	if cfg.MailboxSize <= 0 {
		cfg.MailboxSize = DefaultMailboxSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Engine{
		addr:        cfg.Address,
		mailboxSize: cfg.MailboxSize,
		log:         cfg.Logger,
		ctx:         ctx,
		cancel:      cancel,
		actors:      make(map[string]*actor),
	}
}

// Address is the address this engine's PIDs carry.
func (e *Engine) Address() string { return e.addr }

// SpawnOption varies one Spawn. Every option reports bad values the same
// way: Spawn fails with an error wrapping ErrInvalidConfig.
type SpawnOption func(*spawnConfig) error

type spawnConfig struct {
	mailboxSize int
	ctx         context.Context
}

// WithMailboxSize overrides the engine's mailbox bound for this actor.
func WithMailboxSize(n int) SpawnOption {
	return func(c *spawnConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: mailbox size %d", ErrInvalidConfig, n)
		}
		c.mailboxSize = n
		return nil
	}
}

// WithContext makes ctx the parent of the actor's context (Context.Context),
// so cancelling a run cancels the work of the actors that serve it. It does
// not stop the actor: use Stop for that.
func WithContext(ctx context.Context) SpawnOption {
	return func(c *spawnConfig) error {
		if ctx == nil {
			return fmt.Errorf("%w: nil context", ErrInvalidConfig)
		}
		c.ctx = ctx
		return nil
	}
}

// Spawn starts r as actor id. Started is its first message. A live actor
// with the same id fails with ErrExists.
func (e *Engine) Spawn(id string, r Receiver, opts ...SpawnOption) (PID, error) {
	if id == "" || r == nil {
		return PID{}, fmt.Errorf("%w: actor needs an id and a receiver", ErrInvalidConfig)
	}
	sc := spawnConfig{mailboxSize: e.mailboxSize}
	for _, o := range opts {
		if err := o(&sc); err != nil {
			return PID{}, err
		}
	}
	a := &actor{e: e, pid: PID{Address: e.addr, ID: id}, r: r, size: sc.mailboxSize, parent: sc.ctx}
	a.c.a = a
	a.q.Push(envelope{msg: Started{}}) // ahead of anything sent once it is visible
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return PID{}, fmt.Errorf("spawn %s: engine %w", id, ErrClosed)
	case e.actors[id] != nil:
		e.mu.Unlock()
		return PID{}, fmt.Errorf("spawn %s: %w", id, ErrExists)
	}
	e.actors[id] = a
	e.mu.Unlock()
	a.schedule()
	return a.pid, nil
}

// Send enqueues msg for pid without blocking: ErrMailboxFull when the
// mailbox is at its bound, ErrNoActor when there is no such actor or it is
// stopping, ErrNotLocal for another engine's PID (an empty Address counts
// as local).
func (e *Engine) Send(pid PID, msg any) error {
	return e.send(pid, envelope{msg: msg})
}

// SendWithSender is Send with a sender the receiver reads from
// Context.Sender. Actors sending with Context.Send get it set to themselves.
func (e *Engine) SendWithSender(pid PID, msg any, sender PID) error {
	return e.send(pid, envelope{msg: msg, sender: &sender})
}

// Request sends msg to pid and waits for the actor to answer with
// Context.Respond. It fails with ErrNoResponse if the actor handles the
// message without responding, ErrPanic if it panics, or ctx's error.
func (e *Engine) Request(ctx context.Context, pid PID, msg any) (any, error) {
	req := &request{ch: make(chan result, 1)}
	if err := e.send(pid, envelope{msg: msg, req: req}); err != nil {
		return nil, err
	}
	select {
	case r := <-req.ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (e *Engine) send(pid PID, env envelope) error {
	a, err := e.lookup(pid)
	if err != nil {
		return err
	}
	return a.send(env)
}

func (e *Engine) lookup(pid PID) (*actor, error) {
	if pid.Address != "" && pid.Address != e.addr {
		return nil, fmt.Errorf("%s: %w", pid, ErrNotLocal)
	}
	e.mu.RLock()
	a := e.actors[pid.ID]
	e.mu.RUnlock()
	if a == nil {
		return nil, fmt.Errorf("%s: %w", pid, ErrNoActor)
	}
	return a, nil
}

// Stop asks the actor to stop and returns at once: what is already in its
// mailbox is handled, then Stopped, then the actor is removed. Its context
// is cancelled now, with cause ErrStopped. Stopping a stopping actor is a
// no-op; an unknown one is ErrNoActor.
func (e *Engine) Stop(pid PID) error {
	a, err := e.lookup(pid)
	if err != nil {
		return err
	}
	a.stop()
	return nil
}

// StopWait is Stop that waits until the actor has handled Stopped and is
// gone. An actor must not StopWait itself (it would wait for its own return).
func (e *Engine) StopWait(ctx context.Context, pid PID) error {
	a, err := e.lookup(pid)
	if errors.Is(err, ErrNoActor) {
		return nil // already gone
	}
	if err != nil {
		return err
	}
	a.stop()
	select {
	case <-a.doneChan():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop %s: %w", pid, context.Cause(ctx))
	}
}

// Shutdown refuses new spawns, stops every actor and waits for them up to
// ctx. Safe to call twice.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	all := make([]*actor, 0, len(e.actors))
	for _, a := range e.actors {
		all = append(all, a)
	}
	e.mu.Unlock()
	for _, a := range all {
		a.stop()
	}
	left := 0
	for _, a := range all {
		select {
		case <-a.doneChan():
		case <-ctx.Done():
			left++
		}
	}
	e.cancel(ErrClosed)
	if left > 0 {
		return fmt.Errorf("shutdown: %d actors still running: %w", left, context.Cause(ctx))
	}
	return nil
}

// Len reports how many actors live on the engine, stopping ones included.
func (e *Engine) Len() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.actors)
}

func (e *Engine) remove(a *actor) {
	e.mu.Lock()
	if e.actors[a.pid.ID] == a {
		delete(e.actors, a.pid.ID)
	}
	e.mu.Unlock()
}
