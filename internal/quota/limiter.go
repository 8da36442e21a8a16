package quota

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// Config configures a Limiter.
type Config struct {
	// Name names the endpoint in waiting notices and snapshots.
	Name string
	// Limits are the limits the operator declared; zero fields are learned
	// from the provider's answers. Negative fields count as undeclared
	// (Limits.Validate reports them).
	Limits Limits
	// OnWait, when set, hears how long each call that had to wait waited,
	// once it is granted (for a histogram). It is called from the waiting
	// caller's goroutine, outside the limiter's lock.
	OnWait func(waited time.Duration)
}

// Tuning. The margins keep a grant that the limiter believes in from being
// refused by the provider when clocks, latency or rounding differ a little.
const (
	// rateMargin paces a hair below the known rate.
	rateMargin = 0.99
	// arrivalJitter is how much earlier than its neighbours a granted call
	// may reach the provider; a bucket is kept that much refill (at least
	// one call) below its capacity.
	arrivalJitter = 50 * time.Millisecond
	// startWindow is how many calls may be under way while nothing is
	// known of the quota; each accepted answer widens it by windowGrowth
	// (×1.5 a round trip), so a fan-out to a provider with room is little
	// slowed, and one to a provider without room is refused only a little
	// before its first refusal teaches a pace.
	startWindow  = 8
	windowGrowth = 0.5
	// burstWindow groups grants made at once, to measure the burst a
	// provider accepted.
	burstWindow = 10 * time.Millisecond
	// refusalSpan and maxRefusalSpan bound the time between the two
	// refusals that measure the accepted rate (grantLog.rateBefore): long
	// enough for precision, short enough that idle time does not count.
	refusalSpan    = time.Second
	maxRefusalSpan = 4 * time.Second
	// refusalBackoff is the share of the measured rate kept after a refusal.
	refusalBackoff = 0.9
	// probeGrowth raises a rate learned from refusals by this share on each
	// accepted answer, so that the limiter finds room the provider gives
	// later; the next refusal measures it again.
	probeGrowth = 0.002
	// firstGuess is the rate, in calls a second, after a refusal with
	// nothing accepted to measure.
	firstGuess = 1.0
	// floorRate is the lowest rate learning may go to: one call a minute.
	floorRate = 1.0 / 60
)

// Limiter holds one endpoint's quota in memory and paces the calls of all
// its callers: it implements model.Gate. It reads no transport; every
// answer reaches it through Ticket.Done. It is safe for concurrent use.
type Limiter struct {
	name   string
	onWait func(time.Duration)

	mu       sync.Mutex
	declared Limits

	// What the answers taught. hdr holds the per-minute limits the
	// headers gave, by bucket (0: none); hdrBurst the most requests a
	// header proved the provider held at once; aimd the request rate (a
	// second) learned from refusals without headers, aimdBurst the largest
	// burst of accepted calls. learned is set by the first header or
	// refusal.
	hdr       [nBuckets]int64
	hdrBurst  float64
	aimd      float64
	aimdBurst float64
	learned   bool
	window    float64 // calls under way while nothing is known

	b [nBuckets]bucket // by the indexes below

	inFlight    int
	pausedUntil time.Time
	pauseAsked  time.Duration

	queue   fairQueue
	blocked string // why the queue's head waits
	timer   *time.Timer
	timerAt time.Time

	log    grantLog
	owners map[string]map[*Ticket]struct{}

	grants, refusals, waits uint64
	waited                  time.Duration
}

// The indexes of a limiter's buckets, of a ticket's charges and marks and
// of an answer's signals.
const (
	reqB = iota // requests
	tokB        // input plus output tokens
	inB         // input tokens
	outB        // output tokens
	nBuckets
)

// charge is what a call of in input and out output tokens takes from each
// bucket; negative counts are none.
func charge(in, out int64) [nBuckets]float64 {
	i, o := float64(max(in, 0)), float64(max(out, 0))
	return [nBuckets]float64{1, i + o, i, o}
}

var _ model.Gate = (*Limiter)(nil)

// New returns a limiter for one endpoint, its buckets full.
func New(cfg Config) *Limiter {
	l := &Limiter{name: cfg.Name, onWait: cfg.OnWait, declared: cfg.Limits.clean(), window: startWindow,
		owners: map[string]map[*Ticket]struct{}{}}
	l.recompute(time.Now())
	return l
}

// Declare lowers the declared limits to lim, field by field (Limits.Lower):
// a second caller declaring the endpoint differently is never exceeded.
func (l *Limiter) Declare(lim Limits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.declared.Lower(lim)
	if d == l.declared {
		return
	}
	l.declared = d
	now := time.Now()
	l.recompute(now)
	l.dispatch(now)
}

// Take waits for room for one attempt of ask and returns its ticket; see
// TakeFor.
func (l *Limiter) Take(ctx context.Context, ask model.Ask) (model.Ticket, error) {
	t, err := l.TakeFor(ctx, "", ask)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// TakeFor waits for room for one attempt of ask and returns its ticket,
// which owner holds (ReleaseOwner gives back all of an owner's tickets; ""
// is no owner). A call that finds others waiting or no room queues fairly
// (by run, then thread, first come first served within a thread) and
// tells the QuotaNotice in ctx, if any, why it waits and when it goes on.
// If ctx ends first, the call leaves the queue and TakeFor returns an
// error wrapping ctx's cause; if the notice's Resumed fails, the ticket is
// given back and its error returned.
func (l *Limiter) TakeFor(ctx context.Context, owner string, ask model.Ask) (*Ticket, error) {
	if ctx.Err() != nil {
		return nil, l.ctxErr(ctx)
	}
	l.mu.Lock()
	now := time.Now()
	if l.queue.len() == 0 {
		if _, why := l.check(now, ask); why == "" {
			t := l.grant(now, ask, owner)
			l.mu.Unlock()
			return t, nil
		}
	}
	w := &waiter{ask: ask, owner: owner, since: now, ready: make(chan struct{})}
	l.queue.push(w)
	l.waits++
	l.dispatch(now)
	why := l.blocked
	l.mu.Unlock()

	notice := model.QuotaNoticeFrom(ctx)
	select {
	case <-w.ready:
	default:
		if notice != nil {
			notice.Waiting(ctx, l.name, why)
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			l.mu.Lock()
			t := w.ticket
			if t == nil {
				l.queue.remove(w)
				l.waited += time.Since(w.since)
				l.dispatch(time.Now())
			}
			l.mu.Unlock()
			if t != nil {
				t.Cancel()
			}
			return nil, l.ctxErr(ctx)
		}
	}
	t := w.ticket
	if l.onWait != nil {
		l.onWait(t.grantedAt.Sub(w.since))
	}
	if notice != nil {
		if err := notice.Resumed(ctx); err != nil {
			t.Cancel()
			return nil, err
		}
	}
	return t, nil
}

func (l *Limiter) ctxErr(ctx context.Context) error {
	return fmt.Errorf("quota %s: waiting for the quota: %w", l.name, context.Cause(ctx))
}

// ReleaseOwner gives back the places in flight of every ticket owner holds
// (a worker that died), keeping what they were charged, since their calls
// may have reached the provider; their later Done is ignored. It returns
// how many tickets it released.
func (l *Limiter) ReleaseOwner(owner string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := l.owners[owner]
	n := len(ts)
	for t := range ts {
		l.end(t, void)
	}
	if n > 0 {
		l.dispatch(time.Now())
	}
	return n
}

// recompute sets the buckets from what is declared and learned: the lower
// of each wins, and learning never raises a limit above its declared value.
func (l *Limiter) recompute(now time.Time) {
	d := l.declared

	// Requests.
	rate, capacity := 0.0, 0.0
	lower := func(r, c float64) { // every caller has r > 0
		if rate == 0 || r < rate {
			rate = r
		}
		if capacity == 0 || c < capacity {
			capacity = c
		}
	}
	if d.RequestsPerMinute > 0 {
		lower(float64(d.RequestsPerMinute)/60, float64(cmp.Or(d.Burst, d.RequestsPerMinute)))
	}
	if l.hdr[reqB] > 0 {
		lower(float64(l.hdr[reqB])/60, max(1, min(l.hdrBurst, float64(l.hdr[reqB]))))
	} else if l.aimd > 0 {
		lower(l.aimd, max(1, l.aimdBurst))
	}
	l.b[reqB].set(now, rate, capacity)

	// Tokens: the providers' token buckets hold a minute's worth.
	tokens := func(i int, declared int64) {
		limit := low(declared, l.hdr[i])
		l.b[i].set(now, float64(limit)/60, float64(limit))
	}
	tokens(tokB, d.TokensPerMinute)
	tokens(inB, d.InputTokensPerMinute)
	tokens(outB, d.OutputTokensPerMinute)
}

// known reports whether anything limits the pace: a declared rate, or a
// header or refusal seen. Before that, calls go freely within the window.
func (l *Limiter) known() bool {
	d := l.declared
	return l.learned || d.RequestsPerMinute > 0 || d.TokensPerMinute > 0 ||
		d.InputTokensPerMinute > 0 || d.OutputTokensPerMinute > 0
}

// check says how long ask must wait at now and why; why is "" when it may
// go now, and wait is 0 when it waits for a call to end rather than for
// time to pass.
func (l *Limiter) check(now time.Time, ask model.Ask) (wait time.Duration, why string) {
	if now.Before(l.pausedUntil) {
		return l.pausedUntil.Sub(now), fmt.Sprintf("provider asked to retry after %s", l.pauseAsked.Round(time.Millisecond))
	}
	if l.declared.InFlight > 0 && int64(l.inFlight) >= l.declared.InFlight {
		return 0, "calls in flight"
	}
	if !l.known() && float64(l.inFlight) >= l.window {
		return 0, "calls in flight while learning the provider's limit"
	}
	reqWhy := "requests per minute"
	if l.hdr[reqB] == 0 && l.aimd > 0 && (l.declared.RequestsPerMinute == 0 || l.aimd*60 < float64(l.declared.RequestsPerMinute)) {
		reqWhy = "learning the provider's limit after a refusal"
	}
	need := charge(ask.InputTokens, ask.OutputTokens)
	whys := [nBuckets]string{reqWhy, "tokens per minute", "input tokens per minute", "output tokens per minute"}
	for i := range l.b {
		l.b[i].refill(now)
		if d := l.b[i].wait(need[i]); d > 0 && (why == "" || d > wait) {
			wait, why = d, whys[i]
		}
	}
	return wait, why
}

// grant charges ask and hands out its ticket.
func (l *Limiter) grant(now time.Time, ask model.Ask, owner string) *Ticket {
	t := &Ticket{
		l: l, owner: owner, grantedAt: now, seq: l.log.add(now),
		charged: charge(ask.InputTokens, ask.OutputTokens),
	}
	for i := range l.b {
		l.b[i].take(t.charged[i])
		t.marks[i] = l.b[i].spent
	}
	l.inFlight++
	l.grants++
	if owner != "" {
		if l.owners[owner] == nil {
			l.owners[owner] = map[*Ticket]struct{}{}
		}
		l.owners[owner][t] = struct{}{}
	}
	return t
}

// dispatch grants the queue's calls in turn while there is room, then
// arms the timer for when the head's room will be there (a call ending
// wakes it otherwise).
func (l *Limiter) dispatch(now time.Time) {
	for {
		w := l.queue.head()
		if w == nil {
			l.blocked = ""
			l.stopTimer()
			return
		}
		wait, why := l.check(now, w.ask)
		if why == "" {
			l.queue.pop(w)
			w.ticket = l.grant(now, w.ask, w.owner)
			l.waited += now.Sub(w.since)
			close(w.ready)
			continue
		}
		l.blocked = why
		if wait > 0 {
			l.armTimer(now, wait)
		} else {
			l.stopTimer()
		}
		return
	}
}

func (l *Limiter) armTimer(now time.Time, wait time.Duration) {
	at := now.Add(wait)
	if at.Equal(l.timerAt) {
		return
	}
	l.timerAt = at
	if l.timer == nil {
		l.timer = time.AfterFunc(wait, l.wake)
		return
	}
	l.timer.Reset(wait)
}

func (l *Limiter) stopTimer() {
	if l.timer != nil && !l.timerAt.IsZero() {
		l.timer.Stop()
		l.timerAt = time.Time{}
	}
}

func (l *Limiter) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timerAt = time.Time{}
	l.dispatch(time.Now())
}

// finish ends t's attempt with what the provider answered.
func (l *Limiter) finish(t *Ticket, o model.Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.done {
		return
	}
	isRefused := o.Refused()
	switch {
	case isRefused:
		l.end(t, refused)
		l.refusals++
	case o.Status == 0: // it may never have reached the provider
		l.end(t, void)
	default:
		l.end(t, accepted)
	}
	now := time.Now()
	at := o.At
	if at.IsZero() || at.After(now) {
		at = now
	}
	if u := o.Usage; u != (model.Usage{}) && !isRefused {
		used := charge(u.InputTokens, u.OutputTokens)
		for i := range l.b {
			l.b[i].give(t.charged[i] - used[i])
		}
	}
	l.learn(now, at, t, o, isRefused)
	l.dispatch(now)
}

// end takes t out of flight, leaving its grant in the log in state.
func (l *Limiter) end(t *Ticket, state uint8) {
	t.done = true
	l.inFlight--
	if e := l.log.get(t.seq); e != nil {
		e.state = state
	}
	if t.owner != "" {
		delete(l.owners[t.owner], t)
		if len(l.owners[t.owner]) == 0 {
			delete(l.owners, t.owner)
		}
	}
}

// learn updates what is known of the quota from one answer.
func (l *Limiter) learn(now, at time.Time, t *Ticket, o model.Outcome, isRefused bool) {
	sig := parseSignals(o.Header, at)
	changed := false
	if (sig.any() || isRefused) && !l.learned {
		l.learned, changed = true, true
	}

	// A limit header gives the rate of its bucket; remaining after an
	// accepted call proves the provider held remaining+1 requests at once.
	sigs := [nBuckets]limitSignal{sig.requests, sig.tokens, sig.input, sig.output}
	for i, s := range sigs {
		if s.hasLimit && s.limit != l.hdr[i] {
			l.hdr[i], changed = s.limit, true
		}
	}
	r := sig.requests
	if r.hasRemaining && !isRefused {
		if b := float64(r.remaining + 1); b > l.hdrBurst {
			l.hdrBurst, changed = b, true
		}
	}
	if l.hdr[reqB] == 0 {
		switch {
		case isRefused && !r.any():
			l.cut(t)
			changed = true
		case !isRefused && o.Status != 0:
			if b := float64(l.log.acceptedAround(t.seq, burstWindow)); b > l.aimdBurst {
				l.aimdBurst = b
				changed = changed || l.aimd > 0
			}
			if l.aimd > 0 {
				l.aimd *= 1 + probeGrowth
				changed = true
			}
		}
	}
	if changed {
		l.recompute(now)
	}

	// Levels: what remained when the call arrived, less what went after it.
	// A refused call took nothing from the provider, so it gives back what
	// it was charged (and no longer counts as going after the others).
	// A refused call that said nothing of the requests left proves the
	// request bucket was empty.
	marks := t.marks
	for i, s := range sigs {
		if isRefused {
			l.b[i].give(t.charged[i])
			marks[i] -= t.charged[i]
		}
		switch {
		case s.hasRemaining:
			l.b[i].correct(now, t.grantedAt, float64(s.remaining), marks[i])
		case i == reqB && isRefused:
			l.b[i].correct(now, t.grantedAt, 0, marks[i])
		}
	}

	// A provider asking to retry later pauses everyone until then.
	if sig.retryAfter > 0 && (isRefused || o.Status == 503) {
		if until := at.Add(sig.retryAfter); until.After(l.pausedUntil) {
			l.pausedUntil, l.pauseAsked = until, sig.retryAfter
		}
	}
	if !l.known() && !isRefused && o.Status != 0 {
		l.window += windowGrowth
	}
}

// cut sets the request rate after a refusal that said nothing of the
// limit: a little under the rate the provider was measured to accept
// (grantLog.rateBefore). A measure between two refusals is trusted either
// way; one from the start only lowers the rate, as it counts the burst the
// provider started with. Never below floorRate, never above the declared.
func (l *Limiter) cut(t *Ticket) {
	r, anchored, ok := l.log.rateBefore(t.seq, refusalSpan, maxRefusalSpan)
	switch {
	case ok:
		r *= refusalBackoff
	case l.aimd > 0:
		r = l.aimd / 2
	default:
		r = firstGuess
	}
	r = max(r, floorRate)
	if l.aimd == 0 || r < l.aimd || anchored {
		l.aimd = r
	}
	if d := l.declared.RequestsPerMinute; d > 0 {
		l.aimd = min(l.aimd, float64(d)/60)
	}
}

// Ticket is one granted attempt's share of the quota.
type Ticket struct {
	l         *Limiter
	owner     string
	seq       uint64
	grantedAt time.Time
	charged   [nBuckets]float64 // what the grant took from each bucket
	marks     [nBuckets]float64 // the buckets' spent after this grant
	done      bool              // guarded by l.mu
}

// Done gives back the ticket's place in flight and teaches the limiter
// what the provider answered. Calls after the first, and calls after
// ReleaseOwner released the ticket, do nothing.
func (t *Ticket) Done(o model.Outcome) { t.l.finish(t, o) }

// Cancel gives the ticket back unused, refunding what it was charged: its
// attempt was never sent. It does nothing after Done or another Cancel.
func (t *Ticket) Cancel() {
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.done {
		return
	}
	l.end(t, void)
	for i := range l.b {
		l.b[i].give(t.charged[i])
	}
	l.dispatch(time.Now())
}
