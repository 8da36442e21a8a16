package natstransport

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/actor"
	"github.com/formica-run/formica/internal/actor/internal/ring"
)

// Serve subscribes h to subject (in queue group queue when not empty).
// Handlers never run on the read loop. With maxConcurrent > 0 at most that
// many run at once and up to Config.MaxPending more wait; past that a message
// is refused with actor.ErrorMsg(actor.CodeOverloaded, "overloaded"), or
// logged when it has no reply subject. A handler that panics is logged and
// its request answered with actor.CodeInternal.
func (t *Transport) Serve(subject, queue string, maxConcurrent int, h actor.Handler) (actor.Subscription, error) {
	if h == nil || maxConcurrent < 0 {
		return nil, fmt.Errorf("natstransport: serve %s: %w: need a handler and maxConcurrent >= 0", subject, actor.ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &serveSub{t: t, subject: subject, h: h, max: maxConcurrent, ctx: ctx, cancel: cancel}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		cancel(actor.ErrClosed)
		return nil, fmt.Errorf("natstransport: serve %s: transport %w", subject, actor.ErrClosed)
	}
	sub, err := t.nc.QueueSubscribe(subject, queue, s.dispatch)
	if err != nil {
		cancel(actor.ErrClosed)
		return nil, fmt.Errorf("natstransport: serve %s: %w", subject, err)
	}
	s.sub = sub
	t.serves[s] = struct{}{}
	return s, nil
}

// serveSub is one Serve registration. Workers are started per message up to
// max and keep taking queued messages until the queue is empty, so an idle
// subscription holds no goroutine.
type serveSub struct {
	t       *Transport
	subject string
	h       actor.Handler
	max     int // 0: unbounded
	ctx     context.Context
	cancel  context.CancelCauseFunc
	sub     *nats.Subscription
	wg      sync.WaitGroup

	mu       sync.Mutex
	q        ring.Ring[*nats.Msg]
	running  int
	stopping bool
}

// dispatch runs on the read loop: it only counts, queues or refuses.
func (s *serveSub) dispatch(m *nats.Msg) {
	s.mu.Lock()
	switch {
	case s.stopping:
		s.mu.Unlock()
		s.refuse(m, actor.CodeClosed, "closed: subscription stopping")
	case s.max == 0 || s.running < s.max:
		s.running++
		s.wg.Add(1)
		s.mu.Unlock()
		go s.work(m)
	case s.q.Len() < s.t.cfg.MaxPending:
		s.q.Push(m)
		s.mu.Unlock()
	default:
		s.mu.Unlock()
		s.refuse(m, actor.CodeOverloaded, actor.CodeOverloaded)
	}
}

func (s *serveSub) work(m *nats.Msg) {
	defer s.wg.Done()
	for {
		s.handle(m)
		s.mu.Lock()
		next, ok := s.q.Pop()
		if !ok || s.stopping {
			s.running--
			s.mu.Unlock()
			if ok {
				s.refuse(next, actor.CodeClosed, "closed: subscription stopping")
			}
			return
		}
		s.mu.Unlock()
		m = next
	}
}

func (s *serveSub) handle(m *nats.Msg) {
	r := &replier{t: s.t, subject: m.Reply}
	defer func() {
		if v := recover(); v != nil {
			s.t.log.Error("handler panicked", "subject", s.subject, "panic", v)
			if err := r.Reply(actor.ErrorMsg(actor.CodeInternal, "handler failed")); err != nil {
				s.t.log.Warn("reply after panic failed", "subject", s.subject, "err", err)
			}
		}
	}()
	msg, err := s.t.receive(m, m.Subject)
	if err != nil {
		s.t.log.Warn("unreadable message", "subject", s.subject, "err", err)
		r.Reply(actor.ErrorMsg(actor.CodeInternal, err.Error()))
		return
	}
	msg.Subject = m.Subject
	s.h(s.ctx, msg, r)
}

// refuse answers a message that will not be handled, so the requester hears
// at once instead of waiting for its idle timeout.
func (s *serveSub) refuse(m *nats.Msg, code, text string) {
	if m.Reply == "" {
		s.t.log.Warn("refused message without reply subject", "subject", s.subject, "reason", code)
		return
	}
	if err := s.t.publish(m.Reply, "", actor.ErrorMsg(code, text), nil); err != nil {
		s.t.log.Warn("refusal not sent", "subject", s.subject, "reason", code, "err", err)
	}
}

// Stop unsubscribes (draining what the client already received, which is
// refused as closed), cancels the handlers' context, refuses queued
// messages and waits for running handlers. The drain and the wait share one
// bound, Config.StopTimeout; past it Stop returns an error wrapping
// context.DeadlineExceeded while the stragglers finish on their own.
func (s *serveSub) Stop() error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil
	}
	s.stopping = true
	var queued []*nats.Msg
	for m, ok := s.q.Pop(); ok; m, ok = s.q.Pop() {
		queued = append(queued, m)
	}
	s.mu.Unlock()
	s.cancel(actor.ErrClosed)
	for _, m := range queued {
		s.refuse(m, actor.CodeClosed, "closed: subscription stopping")
	}

	wait, cancel := context.WithTimeout(context.Background(), s.t.cfg.StopTimeout)
	defer cancel()
	var errs []error
	closed := s.sub.StatusChanged(nats.SubscriptionClosed)
	if err := s.sub.Drain(); err != nil {
		// The connection is closing or closed: nothing more will arrive.
		if uerr := s.sub.Unsubscribe(); uerr != nil && !errors.Is(uerr, nats.ErrConnectionClosed) && !errors.Is(uerr, nats.ErrBadSubscription) {
			errs = append(errs, fmt.Errorf("natstransport: stop %s: %w", s.subject, uerr))
		}
	} else {
		select {
		case <-closed:
		case <-wait.Done():
			errs = append(errs, fmt.Errorf("natstransport: stop %s: drain not done after %v: %w", s.subject, s.t.cfg.StopTimeout, context.DeadlineExceeded))
		}
	}

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-wait.Done():
		s.mu.Lock()
		n := s.running
		s.mu.Unlock()
		errs = append(errs, fmt.Errorf("natstransport: stop %s: %d handlers still running after %v: %w", s.subject, n, s.t.cfg.StopTimeout, context.DeadlineExceeded))
	}

	s.t.mu.Lock()
	delete(s.t.serves, s)
	s.t.mu.Unlock()
	return errors.Join(errs...)
}

// replier answers one served message on its reply subject.
type replier struct {
	t       *Transport
	subject string
}

func (r *replier) Reply(m actor.Msg) error {
	if r.subject == "" {
		return nil
	}
	return r.t.publish(r.subject, "", m, nil)
}

func (r *replier) NoReply() bool { return r.subject == "" }
