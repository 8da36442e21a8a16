package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// ErrCancelled ends a long request whose context ended before its answer
// (and, with a grace, before the answer the cancel asked for).
var ErrCancelled = errors.New("cancelled")

// Verdict is what one reply means to its long request.
type Verdict int

const (
	// Ignore: not the answerer's word on the request (a stale token, say);
	// the silence goes on.
	Ignore Verdict = iota
	// Alive: a keep-alive; the answerer works on it.
	Alive
	// Final: the answer. The request is over.
	Final
	// Again: send the request anew (Request is called again), and count
	// the answerer alive: it asked for something the request lacked.
	Again
)

// Long is how a request that may take long is asked: a spawn waiting on its
// helper, a thread placed on a worker, an approval waiting on a person. It
// is sent once; the answerer sends keep-alives until its one answer. The
// request ends, once, with that answer, when the answerer has been silent
// past its loss window (and past what Tolerate forgives), when nobody
// listens, or when its context ends. A silent request sent before the
// connection moved to another server is asked again, since the request, its
// keep-alives or its answer may have gone with the old server; the
// answerer answers the same request asked twice with the same answer, by
// the request's key.
//
// A request waiting is data, not a goroutine: replies come on the
// transport's delivery goroutine, silence on a timer and the cancel on its
// context's AfterFunc, so a parent of ten thousand helpers holds ten
// thousand records, not ten thousand stacks. Ask is the same for a caller
// that waits anyway.
type Long struct {
	// Subject is where the request goes.
	Subject string
	// Request builds the request; it is called, under the request's lock,
	// each time the request is sent.
	Request func() wire.Msg
	// Reply judges each reply, one at a time, in arrival order.
	Reply func(m wire.Msg) Verdict
	// End is told, once and on a goroutine of its own, how the request
	// ended: nil after a Final reply, else an error wrapping ErrSilent,
	// ErrNoResponders, ErrClosed or ErrCancelled.
	End func(err error)
	// Idle is how long the answerer may be silent before it is presumed
	// lost; read at each check, as a peer's pace may be learnt meanwhile.
	Idle func() time.Duration
	// Tolerate, when set, is asked before a silent request is given up;
	// the silence since heard is borne until the time it returns (a busy
	// peer whose heartbeats still come). The zero time gives up.
	Tolerate func(heard, now time.Time) time.Time
	// Moves, when set, counts the connection's moves to another server.
	Moves func() uint64
	// Cancel, when set, is called once when the context ends before the
	// answer, to tell the answerer. The request then waits up to Grace for
	// the answer the cancel asks for before it ends with ErrCancelled.
	Cancel func(cause error)
	Grace  time.Duration

	ctx        context.Context
	tr         Transport
	mu         sync.Mutex
	stopReq    func()
	stopCancel func() bool
	timer      *time.Timer
	sentAt     uint64    // Moves when the request was last sent
	heard      time.Time // when the answerer last spoke on the request
	due        time.Time // the end of a cancel's grace, once cancelling
	cancelling bool
	over       bool
}

// Start sends the request on tr and returns at once; End tells how it
// ended, possibly before Start returns.
func (l *Long) Start(ctx context.Context, tr Transport) {
	l.ctx, l.tr = ctx, tr
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.sendLocked() {
		return
	}
	l.timer = time.AfterFunc(l.Idle(), l.check)
	l.stopCancel = context.AfterFunc(ctx, l.cancelled)
}

// Ask sends the request and waits for its end.
func (l *Long) Ask(ctx context.Context, tr Transport) error {
	done := make(chan error, 1)
	end := l.End
	l.End = func(err error) {
		if end != nil {
			end(err)
		}
		done <- err
	}
	l.Start(ctx, tr)
	return <-done
}

// sendLocked sends the request, replacing the one in flight if any; false
// means it could not and the request has ended.
func (l *Long) sendLocked() bool {
	// The moves are read before sending: a move while the request goes
	// out may have lost it, and must count as after it.
	var moves uint64
	if l.Moves != nil {
		moves = l.Moves()
	}
	stop, err := l.tr.RequestFunc(l.ctx, l.Subject, l.Request(), l.reply)
	if err != nil {
		if l.ctx.Err() != nil {
			l.endLocked(l.cancelError())
		} else {
			l.endLocked(err)
		}
		return false
	}
	if l.stopReq != nil {
		l.stopReq()
	}
	l.stopReq, l.heard, l.sentAt = stop, time.Now(), moves
	return true
}

// reply takes one reply, or the transport's end of the request (err).
func (l *Long) reply(m wire.Msg, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return
	}
	if err != nil {
		if l.cancelling || l.ctx.Err() != nil {
			l.cancelLocked()
			l.endLocked(l.cancelError())
			return
		}
		l.endLocked(err)
		return
	}
	switch l.Reply(m) {
	case Alive:
		l.heard = time.Now()
	case Final:
		l.endLocked(nil)
	case Again:
		l.sendLocked()
	}
}

// check runs when the request may have been silent for its loss window.
func (l *Long) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return
	}
	now := time.Now()
	if l.cancelling {
		if left := l.due.Sub(now); left > 0 {
			l.timer.Reset(left)
			return
		}
		l.endLocked(l.cancelError())
		return
	}
	idle := l.Idle()
	if left := idle - now.Sub(l.heard); left > 0 {
		l.timer.Reset(left)
		return
	}
	// What was heard since the move does not count: a keep-alive the old
	// server delivered may be read only after it.
	if l.Moves != nil && l.Moves() != l.sentAt {
		if l.sendLocked() {
			l.timer.Reset(idle)
		}
		return
	}
	if l.Tolerate != nil {
		if until := l.Tolerate(l.heard, now); until.After(now) {
			l.timer.Reset(until.Sub(now))
			return
		}
	}
	l.endLocked(fmt.Errorf("%s: no reply for %v: %w", l.Subject, now.Sub(l.heard).Round(time.Millisecond), ErrSilent))
}

// cancelled runs when the request's context ends.
func (l *Long) cancelled() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over || l.cancelling {
		return
	}
	l.cancelLocked()
	if l.Grace <= 0 {
		l.endLocked(l.cancelError())
		return
	}
	l.due = time.Now().Add(l.Grace)
	l.timer.Reset(l.Grace)
}

// cancelLocked tells the answerer of the cancel, once.
func (l *Long) cancelLocked() {
	if l.cancelling {
		return
	}
	l.cancelling = true
	if l.Cancel != nil {
		l.Cancel(context.Cause(l.ctx))
	}
}

func (l *Long) cancelError() error {
	if cause := context.Cause(l.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("%w: %w", ErrCancelled, cause)
	}
	return ErrCancelled
}

// endLocked ends the request, once.
func (l *Long) endLocked(err error) {
	if l.over {
		return
	}
	l.over = true
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.stopCancel != nil {
		l.stopCancel()
	}
	if l.stopReq != nil {
		l.stopReq()
	}
	if l.End != nil {
		go l.End(err)
	}
}
