package natstransport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/internal/ring"
	"github.com/formica-run/formica/internal/wire"
)

// Serve subscribes h to subject (in queue group queue when not empty).
// Handlers never run on the read loop. With maxConcurrent > 0 at most that
// many run at once and up to Config.MaxPending more wait; past that a message
// is refused with wire.ErrorMsg(wire.CodeOverloaded, "overloaded"), or
// logged when it has no reply subject. A handler that panics is logged and
// its request answered with wire.CodeInternal.
func (t *Transport) Serve(subject, queue string, maxConcurrent int, h transport.Handler) (transport.Subscription, error) {
	return t.serve(subject, maxConcurrent, h, func(s *serveSub) (err error) {
		s.sub, err = t.nc.QueueSubscribe(subject, queue, s.dispatch)
		return err
	})
}

// ServeMicro is Serve through an endpoint of micro service svc, on the
// transport's connection, so `nats micro stats` counts the subject's
// requests. The endpoint's own handler only hands each message over, as
// the subscription's does for Serve: micro's one request at a time per
// endpoint does not hold the handlers back, and the processing time micro
// reports is that hand-over, not the handling. Stopping the subscription
// stops svc.
func (t *Transport) ServeMicro(svc micro.Service, endpoint, subject string, maxConcurrent int, h transport.Handler) (transport.Subscription, error) {
	return t.serve(subject, maxConcurrent, h, func(s *serveSub) error {
		s.svc = svc
		return svc.AddEndpoint(endpoint, micro.HandlerFunc(func(r micro.Request) {
			s.dispatch(&nats.Msg{Subject: r.Subject(), Reply: r.Reply(), Header: nats.Header(r.Headers()), Data: r.Data()})
		}), micro.WithEndpointSubject(subject), micro.WithEndpointQueueGroupDisabled())
	})
}

// serve registers h on subject, subscribed by subscribe.
func (t *Transport) serve(subject string, maxConcurrent int, h transport.Handler, subscribe func(*serveSub) error) (transport.Subscription, error) {
	if h == nil || maxConcurrent < 0 {
		return nil, fmt.Errorf("natstransport: serve %s: %w: need a handler and maxConcurrent >= 0", subject, transport.ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &serveSub{t: t, subject: subject, h: h, max: maxConcurrent, ctx: ctx, cancel: cancel}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		cancel(transport.ErrClosed)
		return nil, fmt.Errorf("natstransport: serve %s: transport %w", subject, transport.ErrClosed)
	}
	if err := subscribe(s); err != nil {
		cancel(transport.ErrClosed)
		return nil, fmt.Errorf("natstransport: serve %s: %w", subject, err)
	}
	t.serves[s] = struct{}{}
	return s, nil
}

// serveSub is one Serve registration. Workers are started per message up to
// max and keep taking queued messages until the queue is empty; then up to
// maxIdle of them wait idleLinger for the next message, which they take
// before any new worker is started: a worker's stack has grown to its
// handler's depth, and a new goroutine grows its own again, copying it at
// each doubling, on the path of every request. A subscription idle for
// idleLinger holds no goroutine.
type serveSub struct {
	t       *Transport
	subject string
	h       transport.Handler
	max     int // 0: unbounded
	ctx     context.Context
	cancel  context.CancelCauseFunc
	sub     *nats.Subscription // Serve's; nil for ServeMicro's,
	svc     micro.Service      // which goes with svc's endpoint
	wg      sync.WaitGroup

	mu       sync.Mutex
	q        ring.Ring[*nats.Msg]
	running  int              // workers, idle ones included
	idle     []chan *nats.Msg // idle workers, each waiting on its channel
	stopping bool
}

// maxIdle bounds the idle workers of a subscription, and idleLinger how
// long one waits for a message before it ends.
const (
	maxIdle    = 16
	idleLinger = time.Second
)

// dispatch runs on the read loop: it only counts, queues or refuses.
func (s *serveSub) dispatch(m *nats.Msg) {
	if FromStream(m) {
		s.t.log.Warn("dropped a stream's message delivered on a served subject", "subject", m.Subject)
		return
	}
	s.mu.Lock()
	switch {
	case s.stopping:
		s.mu.Unlock()
		s.refuse(m, wire.CodeClosed, "closed: subscription stopping")
	case len(s.idle) > 0:
		n := len(s.idle) - 1
		ch := s.idle[n]
		s.idle[n] = nil
		s.idle = s.idle[:n]
		s.mu.Unlock()
		ch <- m // its room of one is free: it is handed a message only while idle
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
		s.refuse(m, wire.CodeOverloaded, string(wire.CodeOverloaded))
	}
}

func (s *serveSub) work(m *nats.Msg) {
	defer s.wg.Done()
	var wake chan *nats.Msg
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for m != nil {
		s.handle(m)
		s.mu.Lock()
		next, ok := s.q.Pop()
		if ok && !s.stopping {
			s.mu.Unlock()
			m = next
			continue
		}
		if s.stopping || len(s.idle) >= maxIdle {
			s.running--
			s.mu.Unlock()
			if ok {
				s.refuse(next, wire.CodeClosed, "closed: subscription stopping")
			}
			return
		}
		if wake == nil {
			wake = make(chan *nats.Msg, 1)
		}
		s.idle = append(s.idle, wake)
		s.mu.Unlock()
		m = s.waitIdle(wake, &linger)
	}
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
}

// waitIdle waits, idle, for the next message handed to wake; nil means the
// worker ends (its linger passed, or the subscription stops).
func (s *serveSub) waitIdle(wake chan *nats.Msg, linger **time.Timer) *nats.Msg {
	if *linger == nil {
		*linger = time.NewTimer(idleLinger)
	} else {
		(*linger).Reset(idleLinger)
	}
	select {
	case m := <-wake:
		return m
	case <-(*linger).C:
	}
	s.mu.Lock()
	i := slices.Index(s.idle, wake)
	if i >= 0 {
		s.idle = slices.Delete(s.idle, i, i+1)
	}
	s.mu.Unlock()
	if i >= 0 {
		return nil
	}
	return <-wake // handed a message as the linger passed: it is on its way
}

func (s *serveSub) handle(m *nats.Msg) {
	r := &replier{t: s.t, subject: m.Reply}
	defer func() {
		if v := recover(); v != nil {
			s.t.log.Error("handler panicked", "subject", s.subject, "panic", v)
			if err := r.Reply(wire.ErrorMsg(wire.CodeInternal, "handler failed")); err != nil {
				s.t.log.Warn("reply after panic failed", "subject", s.subject, "err", err)
			}
		}
	}()
	msg, err := s.t.receive(m, m.Subject)
	if err != nil {
		s.t.log.Warn("unreadable message", "subject", s.subject, "err", err)
		r.Reply(wire.ErrorMsg(wire.CodeInternal, err.Error()))
		return
	}
	msg.Subject = m.Subject
	s.h(s.ctx, msg, r)
}

// refuse answers a message that will not be handled, so the requester hears
// at once instead of waiting for its idle timeout.
func (s *serveSub) refuse(m *nats.Msg, code wire.Code, text string) {
	if m.Reply == "" {
		s.t.log.Warn("refused message without reply subject", "subject", s.subject, "reason", code)
		return
	}
	if err := s.t.publish(m.Reply, "", wire.ErrorMsg(code, text), nil); err != nil {
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
	for _, wake := range s.idle {
		wake <- nil // the idle workers end
	}
	s.idle = nil
	var queued []*nats.Msg
	for m, ok := s.q.Pop(); ok; m, ok = s.q.Pop() {
		queued = append(queued, m)
	}
	s.mu.Unlock()
	s.cancel(transport.ErrClosed)
	for _, m := range queued {
		s.refuse(m, wire.CodeClosed, "closed: subscription stopping")
	}

	wait, cancel := context.WithTimeout(context.Background(), s.t.cfg.StopTimeout)
	defer cancel()
	var errs []error
	if s.svc != nil {
		// Its endpoint's subscription drains; what it still hands over is
		// refused, as the subscription is stopping.
		if err := s.svc.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("natstransport: stop %s: %w", s.subject, err))
		}
	} else if closed := s.sub.StatusChanged(nats.SubscriptionClosed); s.sub.Drain() != nil {
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

func (r *replier) Reply(m wire.Msg) error {
	if r.subject == "" {
		return nil
	}
	return r.t.publish(r.subject, "", m, nil)
}

func (r *replier) NoReply() bool { return r.subject == "" }
