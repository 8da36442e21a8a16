package quota

import (
	"math"
	"time"
)

// bucket is a token bucket refilling continuously. It reads no clock: the
// limiter passes the time of every operation, so one lock orders them all.
//
// Its level may go below zero: a correction (a provider reporting less
// room than we thought, or an answer using more tokens than reserved)
// becomes a debt that refilling pays back before the next grant.
type bucket struct {
	rate  float64 // tokens a second; 0: the bucket is not in use
	cap   float64 // most tokens it holds
	level float64
	at    time.Time // when level was last brought up to date
	// spent is every token taken, net of refunds, since the limiter began:
	// an answer's ticket remembers spent after its own take, so the
	// difference is what was granted after it (see correct).
	spent float64
}

// eps absorbs float rounding in comparisons of levels.
const eps = 1e-9

func (b *bucket) active() bool { return b.rate > 0 }

// refill brings level up to now. A clock stepping back adds nothing.
func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		if b.active() && b.level < b.cap {
			b.level = min(b.cap, b.level+b.rate*d.Seconds())
		}
		b.at = now
	} else if b.at.IsZero() {
		b.at = now
	}
}

// wait is how long from now until n tokens are there (refill first). A
// call larger than the whole bucket waits for a full one instead of forever.
func (b *bucket) wait(n float64) time.Duration {
	missing := min(n, b.cap) - b.level
	if !b.active() || missing <= eps {
		return 0
	}
	s := missing / b.rate
	if s > float64(math.MaxInt64/2)/1e9 {
		return time.Duration(math.MaxInt64 / 2)
	}
	return time.Duration(math.Ceil(s * 1e9))
}

// take charges n tokens; spent counts them even when the bucket is not in
// use, so a limit learned later can be corrected against what went before.
func (b *bucket) take(n float64) {
	if b.active() {
		b.level -= n
	}
	b.spent += n
}

// give refunds n tokens (or charges -n), keeping level within cap.
func (b *bucket) give(n float64) {
	if b.active() {
		b.level = min(b.cap, b.level+n)
	}
	b.spent -= n
}

// set paces b, from now, a hair inside a provider bucket of that rate (a
// second) and capacity, keeping the level (within the new capacity); a
// bucket coming into use starts full, and rate 0 takes b out of use.
func (b *bucket) set(now time.Time, rate, capacity float64) {
	if rate > 0 {
		if capacity > 1 {
			capacity = max(1, capacity-max(1, rate*arrivalJitter.Seconds()))
		}
		rate *= rateMargin
	} else {
		rate, capacity = 0, 0
	}
	b.refill(now)
	if !b.active() && rate > 0 {
		b.level = capacity
	}
	b.rate, b.cap = rate, capacity
	b.level = min(b.level, b.cap)
}

// correct lowers the level to what a provider's answer proves at most:
// remaining tokens when the answered call reached it, plus the refill
// since that call was granted, minus everything granted after it (which
// may have reached the provider after the count). Answers come out of
// order and late, so a correction only ever lowers the level; refilling
// does the rest.
func (b *bucket) correct(now, granted time.Time, remaining, spentAtGrant float64) {
	if !b.active() {
		return
	}
	b.refill(now)
	since := max(now.Sub(granted).Seconds(), 0)
	est := remaining + b.rate*since - (b.spent - spentAtGrant)
	if est < b.level {
		b.level = est
	}
}
