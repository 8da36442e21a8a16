package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/formica-run/formica/internal/event"
)

// Feeds shares the following of runs among every watcher of one process.
//
// Store.Events follows a run for its one caller: a subscription to the
// run's republished batches per call. A process that serves many watchers
// of the same runs (the HTTP API's event streams: SSE clients, dashboard
// tabs) follows them through Feeds instead. Each watched run has one feed:
// one subscription to formica.stored.events.<run>, whatever the number of
// its watchers, whose follower (see follower) reads what it missed by
// direct gets, decodes each stored batch once and hands it, in memory, to
// the buffer of every watcher of the run.
//
// A watcher joins without a consumer: it joins the run's feed first, then
// reads what was stored before by direct gets, from its resume point on,
// then takes the feed's batches, dropping those it read already (each
// batch is a stream sequence, so nothing falls between the two and nothing
// comes twice). A run known to have ended is better read with Replay,
// which needs no feed.
//
// A watcher's buffer holds at most the batches NewFeeds was given
// (DefaultFeedBuffer). The feed never waits
// for a watcher: one whose buffer is full when a batch comes is let go,
// and catches up from the store by direct gets, at its own pace, from the
// last event it delivered, then joins the feed again. So a slow watcher
// stalls no other and misses nothing; it only reads from the store rather
// than from memory until it keeps up. (A watcher that stops reading
// altogether is ended by its caller, such as the HTTP API's write
// deadline.)
//
// A feed ends when its run ends (a batch holding a run.finished, with
// nothing stored after it) or when its last watcher leaves. Feeds is safe
// for concurrent use.
type Feeds struct {
	s      *Store
	buffer int

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu   sync.Mutex
	runs map[string]*feed

	// dropped counts the watchers let go for a full buffer.
	dropped atomic.Int64
}

// DefaultFeedBuffer is how many stored batches a watcher's buffer holds
// (each batch is at most EventsPerBatch events and MaxEventBatch bytes; a
// coordinator stores a run's events in a batch every millisecond or so
// while it has some). The batches are shared by all the watchers of a run.
const DefaultFeedBuffer = 64

// ErrFeedsClosed ends the watchers of closed Feeds.
var ErrFeedsClosed = errors.New("store: event feeds closed")

// NewFeeds returns the feeds of s, each watcher's buffer holding buffer
// batches (DefaultFeedBuffer when buffer is 0 or less). Close them when
// done.
func (s *Store) NewFeeds(buffer int) *Feeds {
	if buffer <= 0 {
		buffer = DefaultFeedBuffer
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Feeds{s: s, buffer: buffer, ctx: ctx, cancel: cancel, runs: map[string]*feed{}}
}

// Close ends every feed; their watchers' Events return ErrFeedsClosed.
func (h *Feeds) Close() { h.cancel(ErrFeedsClosed) }

// Following is how many runs the feeds follow now: the subscriptions they
// hold.
func (h *Feeds) Following() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs)
}

// Events is Store.Events through the run's shared feed: it calls fn with
// each event of run runID whose id is above after, in order, the stored
// ones first, and returns nil after the batch that holds the run's last
// stored run.finished, fn's error if fn fails, or ctx's cause when ctx
// ends (ErrFeedsClosed when the feeds close). fn runs on the caller's
// goroutine, never on the feed's: a slow fn holds back no other watcher.
func (h *Feeds) Events(ctx context.Context, runID string, after uint64, fn func(id uint64, e event.Event) error) error {
	if err := checkID(runID); err != nil {
		return err
	}
	w := &watcher{s: h.s, run: runID, fn: fn, lastID: after, next: max(after/EventsPerBatch, 1)}
	for {
		f, sub, err := h.join(ctx, runID)
		if err != nil {
			return withCause(ctx, err)
		}
		done, err := w.follow(ctx, f, sub)
		h.leave(f, sub)
		if done || err != nil {
			return withCause(ctx, err)
		}
	}
}

// withCause is ctx's cause in place of err when err is ctx's end.
func withCause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return context.Cause(ctx)
	}
	return err
}

// Replay calls fn with each stored event of run runID whose id is above
// after, in order, read by direct gets, and returns nil once it has
// delivered the last one stored (fn's error if fn fails): the history of
// a run that has finished, without following it.
func (s *Store) Replay(ctx context.Context, runID string, after uint64, fn func(id uint64, e event.Event) error) error {
	if err := checkID(runID); err != nil {
		return err
	}
	w := &watcher{s: s, run: runID, fn: fn, lastID: after, next: max(after/EventsPerBatch, 1)}
	return withCause(ctx, w.replay(ctx))
}

// feedBatch is one stored batch of a run's events, decoded once for all
// the run's watchers, who only read it.
type feedBatch struct {
	seq    uint64
	events []idEvent
	// end is what the batch says of its run's end.
	end ending
}

type idEvent struct {
	id uint64
	e  event.Event
}

// decodeBatch reads a stored batch of run's events.
func (s *Store) decodeBatch(run string, m *storedMsg) *feedBatch {
	b := &feedBatch{seq: m.seq}
	s.eachEvent(run, m.seq, m.data, 0, func(id uint64, e event.Event) error {
		b.events = append(b.events, idEvent{id, e})
		b.end.add(e.Type)
		return nil
	})
	return b
}

// A feed follows one run for all its watchers.
type feed struct {
	run string
	// refs counts the watchers holding the feed (under Feeds.mu): joined,
	// or about to be, or let go and not yet left. The feed stops when the
	// last one leaves.
	refs   int
	cancel context.CancelFunc
	// ready is closed once the feed follows the run, or failed to
	// (startErr).
	ready    chan struct{}
	startErr error
	// stopped is closed once the feed no longer follows the run: its
	// subscription is gone.
	stopped chan struct{}

	mu   sync.Mutex
	subs map[*feedSub]struct{}
	// ended: the feed stopped; endSeq is the batch the run ended at
	// (nothing stored after it) and err why the feed stopped otherwise.
	ended  bool
	endSeq uint64
	err    error
}

// feedSub is a watcher's place in a feed: its buffer, closed when the feed
// lets it go.
type feedSub struct {
	ch chan *feedBatch
	// dropped: its buffer was full when a batch came (under feed.mu,
	// before ch is closed).
	dropped bool
}

// join adds a watcher to run's feed once the feed follows the run,
// starting the feed if the run has none.
func (h *Feeds) join(ctx context.Context, run string) (*feed, *feedSub, error) {
	h.mu.Lock()
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		return nil, nil, ErrFeedsClosed
	}
	f := h.runs[run]
	fresh := f == nil
	var fctx context.Context
	if fresh {
		var cancel context.CancelFunc
		fctx, cancel = context.WithCancel(h.ctx)
		f = &feed{run: run, cancel: cancel, ready: make(chan struct{}), stopped: make(chan struct{}), subs: map[*feedSub]struct{}{}}
		h.runs[run] = f
	}
	f.refs++
	h.mu.Unlock()
	if fresh {
		// The feed follows the run before the watcher reads anything: what
		// it delivers from then on reaches the watcher, and what it
		// delivered before is stored.
		h.start(fctx, f)
	} else {
		select {
		case <-f.ready:
		case <-ctx.Done():
			h.leave(f, nil)
			return nil, nil, context.Cause(ctx)
		}
	}
	if f.startErr != nil {
		h.leave(f, nil)
		return nil, nil, f.startErr
	}
	sub := &feedSub{ch: make(chan *feedBatch, h.buffer)}
	f.mu.Lock()
	if f.ended {
		close(sub.ch)
	} else {
		f.subs[sub] = struct{}{}
	}
	f.mu.Unlock()
	return f, sub, nil
}

// leave takes a watcher (sub, if it was added) out of f; the last one to
// leave stops it.
func (h *Feeds) leave(f *feed, sub *feedSub) {
	if sub != nil {
		f.mu.Lock()
		delete(f.subs, sub)
		f.mu.Unlock()
	}
	h.mu.Lock()
	f.refs--
	last := f.refs == 0
	if last && h.runs[f.run] == f {
		delete(h.runs, f.run)
	}
	h.mu.Unlock()
	if last {
		// Once the last watcher is gone, so is the subscription.
		f.cancel()
		<-f.stopped
	}
}

// start subscribes f to its run's republished batches and follows from
// the run's last stored batch on.
func (h *Feeds) start(ctx context.Context, f *feed) {
	defer close(f.ready)
	var fl *follower
	fl = &follower{s: h.s, stream: EventsStream, filter: SubjectEventLog(f.run), live: storedEvents + "." + f.run,
		deliver: func(m *storedMsg) (bool, error) {
			b := h.s.decodeBatch(f.run, m)
			h.dropped.Add(int64(f.fanOut(b)))
			return b.end.ends(fl.ended), nil
		}}
	sub, err := fl.subscribe()
	if err == nil {
		var last uint64
		if last, _, err = h.s.LastEvent(ctx, f.run); err != nil {
			sub.Unsubscribe()
		}
		fl.last = last / EventsPerBatch // the last stored batch
	}
	if err != nil {
		f.startErr = fmt.Errorf("store: follow the events of run %s: %w", f.run, err)
		h.stop(f, 0, f.startErr)
		return
	}
	go func() {
		err := fl.run(ctx, sub)
		h.stop(f, fl.last, err)
	}()
}

// stop ends f, which follows its run no more: at endSeq, the batch its run
// ended at, or for err.
func (h *Feeds) stop(f *feed, endSeq uint64, err error) {
	h.mu.Lock()
	if h.runs[f.run] == f {
		delete(h.runs, f.run)
	}
	h.mu.Unlock()
	f.mu.Lock()
	f.ended, f.endSeq, f.err = true, endSeq, err
	for sub := range f.subs {
		close(sub.ch)
		delete(f.subs, sub)
	}
	f.mu.Unlock()
	close(f.stopped)
}

// fanOut hands b to every watcher's buffer, letting go of those whose
// buffer is full, and returns how many it let go.
func (f *feed) fanOut(b *feedBatch) (dropped int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.subs {
		select {
		case sub.ch <- b:
		default:
			sub.dropped = true
			close(sub.ch)
			delete(f.subs, sub)
			dropped++
		}
	}
	return dropped
}

// A watcher is one caller of Feeds.Events (or Store.Replay).
type watcher struct {
	s   *Store
	run string
	fn  func(uint64, event.Event) error
	// lastID is the id of the last event delivered (or the resume
	// point); next is the sequence of the next batch to read.
	lastID uint64
	next   uint64
	// ended: the last batch read delivered a run.finished.
	ended bool
}

// replay delivers what is stored from w.next on, read by direct gets.
func (w *watcher) replay(ctx context.Context) error {
	s := w.s
	return s.readDirect(ctx, EventsStream, SubjectEventLog(w.run), w.next, directBatch, func(m *storedMsg) error {
		return w.take(s.decodeBatch(w.run, m))
	})
}

// take delivers the events of b past the last one delivered.
func (w *watcher) take(b *feedBatch) error {
	var end ending
	for _, ie := range b.events {
		if ie.id <= w.lastID {
			continue
		}
		if err := w.fn(ie.id, ie.e); err != nil {
			return err
		}
		w.lastID = ie.id
		end.add(ie.e.Type)
	}
	w.next, w.ended = b.seq+1, end.ends(w.ended)
	return nil
}

// follow delivers, once w has joined f (sub), what was stored before, then
// f's batches. It reports whether the watch is over: the run ended, fn
// failed, ctx ended, or the feed failed. Not over: the feed let w go (its
// buffer was full, or the feed stopped before w saw the run end), and w
// joins again, catching up from the store first.
func (w *watcher) follow(ctx context.Context, f *feed, sub *feedSub) (bool, error) {
	if err := w.replay(ctx); err != nil || w.ended {
		return true, err
	}
	for {
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case b, ok := <-sub.ch:
			if ok {
				if b.seq < w.next { // read from the store already
					continue
				}
				if err := w.take(b); err != nil {
					return true, err
				}
				continue
			}
			f.mu.Lock()
			dropped, endSeq, err := sub.dropped, f.endSeq, f.err
			f.mu.Unlock()
			switch {
			case dropped:
				return false, nil
			case err != nil && ctx.Err() != nil:
				return true, context.Cause(ctx)
			case err != nil:
				return true, err
			case w.ended && w.next == endSeq+1:
				return true, nil
			}
			return false, nil
		}
	}
}
