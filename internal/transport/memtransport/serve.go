package memtransport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/internal/ring"
	"github.com/formica-run/formica/internal/wire"
)

// Serve subscribes h to subject (in queue group queue when not empty), as
// natstransport does: at most maxConcurrent handlers at once (0: no
// bound), up to Config.MaxPending more messages waiting, past that a
// refusal with wire.CodeOverloaded; a handler that panics is logged and
// its request answered with wire.CodeInternal.
func (t *Transport) Serve(subject, queue string, maxConcurrent int, h transport.Handler) (transport.Subscription, error) {
	if h == nil || maxConcurrent < 0 || subject == "" {
		return nil, fmt.Errorf("memtransport: serve %q: %w: need a subject, a handler and maxConcurrent >= 0", subject, transport.ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &serveSub{t: t, h: h, max: maxConcurrent, ctx: ctx, cancel: cancel}
	s.sub = &sub{subject: subject, queue: queue, to: s}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		cancel(transport.ErrClosed)
		return nil, fmt.Errorf("memtransport: serve %s: transport %w", subject, transport.ErrClosed)
	}
	t.serves[s] = struct{}{}
	t.net.add(s.sub)
	return s, nil
}

// serveSub is one Serve registration. A handler goroutine takes queued
// messages until none is left, then ends.
type serveSub struct {
	t      *Transport
	sub    *sub
	h      transport.Handler
	max    int // 0: unbounded
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	q        ring.Ring[served]
	running  int
	stopping bool
	done     chan struct{} // closed when the last handler returns after Stop
}

// served is a message waiting for, or given to, a handler.
type served struct {
	m     wire.Msg
	reply string
}

// receive runs in the sender's call: it only counts, queues or refuses.
func (s *serveSub) receive(subject, reply string, m wire.Msg) {
	m.Subject = subject
	in := served{m: m, reply: reply}
	s.mu.Lock()
	switch {
	case s.stopping:
		s.mu.Unlock()
		s.refuse(in, wire.CodeClosed, "closed: subscription stopping")
	case s.max == 0 || s.running < s.max:
		s.running++
		s.mu.Unlock()
		go s.work(in)
	case s.q.Len() < s.t.cfg.MaxPending:
		s.q.Push(in)
		s.mu.Unlock()
	default:
		s.mu.Unlock()
		s.refuse(in, wire.CodeOverloaded, string(wire.CodeOverloaded))
	}
}

func (s *serveSub) work(in served) {
	for {
		s.handle(in)
		s.mu.Lock()
		next, ok := s.q.Pop() // Stop empties the queue
		if !ok {
			s.running--
			if s.running == 0 && s.done != nil {
				close(s.done)
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		in = next
	}
}

func (s *serveSub) handle(in served) {
	r := &replier{t: s.t, subject: in.reply}
	defer func() {
		if v := recover(); v != nil {
			s.t.cfg.Logger.Error("handler panicked", "subject", s.sub.subject, "panic", v)
			if err := r.Reply(wire.ErrorMsg(wire.CodeInternal, "handler failed")); err != nil {
				s.t.cfg.Logger.Warn("reply after panic failed", "subject", s.sub.subject, "err", err)
			}
		}
	}()
	s.h(s.ctx, in.m, r)
}

// refuse answers a message that will not be handled, so its requester
// hears at once instead of after its idle window.
func (s *serveSub) refuse(in served, code wire.Code, text string) {
	if in.reply == "" {
		s.t.cfg.Logger.Warn("refused message without reply subject", "subject", in.m.Subject, "reason", code)
		return
	}
	if _, err := s.t.send(in.reply, "", wire.ErrorMsg(code, text)); err != nil {
		s.t.cfg.Logger.Warn("refusal not sent", "subject", in.m.Subject, "reason", code, "err", err)
	}
}

// Stop unsubscribes, cancels the handlers' context, refuses queued
// messages as closed and waits for running handlers, up to
// Config.StopTimeout; past it it returns an error wrapping
// context.DeadlineExceeded while the stragglers finish on their own.
func (s *serveSub) Stop() error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil
	}
	s.stopping = true
	var queued []served
	for in, ok := s.q.Pop(); ok; in, ok = s.q.Pop() {
		queued = append(queued, in)
	}
	if s.running > 0 {
		s.done = make(chan struct{})
	}
	done := s.done
	s.mu.Unlock()

	s.t.net.remove(s.sub)
	s.cancel(transport.ErrClosed)
	for _, in := range queued {
		s.refuse(in, wire.CodeClosed, "closed: subscription stopping")
	}
	var err error
	if done != nil {
		timer := time.NewTimer(s.t.cfg.StopTimeout)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			err = fmt.Errorf("memtransport: stop %s: handlers still running after %v: %w", s.sub.subject, s.t.cfg.StopTimeout, context.DeadlineExceeded)
		}
	}
	s.t.mu.Lock()
	delete(s.t.serves, s)
	s.t.mu.Unlock()
	return err
}

// replier answers one served message on its reply subject.
type replier struct {
	t       *Transport
	subject string
}

func (r *replier) Reply(m wire.Msg) error {
	if r.subject == "" {
		return nil
	}
	_, err := r.t.send(r.subject, "", m)
	return err
}

func (r *replier) NoReply() bool { return r.subject == "" }
