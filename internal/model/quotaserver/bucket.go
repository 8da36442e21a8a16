package quotaserver

import (
	"math"
	"time"
)

// unit is one token of a bucket in its internal fixed-point measure. A
// bucket refilling at perMinute tokens a minute gains exactly perMinute
// units a nanosecond, so refills, waits and resets are exact integers and
// tests can compare them with explicit times.
const unit = int64(time.Minute)

// maxCapacity keeps capacity*unit within an int64.
const maxCapacity = math.MaxInt64 / unit

// bucket is a token bucket that starts full. It takes the time of every
// operation as a parameter instead of reading the clock, so its arithmetic
// is testable without sleeping; it is not safe for concurrent use.
type bucket struct {
	capacity  int64 // units
	perMinute int64 // tokens a minute = units a nanosecond
	level     int64 // units
	at        time.Time
}

// newBucket returns a full bucket holding capacity tokens (at least 1)
// refilled at perMinute tokens a minute (at least 1).
func newBucket(capacity, perMinute int64, now time.Time) *bucket {
	capacity = min(max(capacity, 1), maxCapacity)
	b := &bucket{capacity: capacity * unit, perMinute: max(perMinute, 1), at: now}
	b.level = b.capacity
	return b
}

// refill adds what has dripped in since the last operation. A clock that
// steps back adds nothing and leaves the reference time alone.
func (b *bucket) refill(now time.Time) {
	if !now.After(b.at) {
		return
	}
	elapsed := int64(now.Sub(b.at))
	if missing := b.capacity - b.level; elapsed >= missing/b.perMinute+1 {
		b.level = b.capacity
	} else {
		b.level += elapsed * b.perMinute
	}
	b.at = now
}

// cost converts n tokens to units; a charge above the capacity costs the
// whole capacity, so an oversized request waits for a full bucket instead
// of being refused forever.
func (b *bucket) cost(n int64) int64 {
	if n >= b.capacity/unit {
		return b.capacity
	}
	return max(n, 0) * unit
}

// allows reports whether n tokens are there at now.
func (b *bucket) allows(now time.Time, n int64) bool {
	b.refill(now)
	return b.level >= b.cost(n)
}

// take removes n tokens at now; the caller has checked allows.
func (b *bucket) take(now time.Time, n int64) {
	b.refill(now)
	b.level = max(b.level-b.cost(n), 0)
}

// remaining is the whole tokens left at now.
func (b *bucket) remaining(now time.Time) int64 {
	b.refill(now)
	return b.level / unit
}

// wait is how long from now until n tokens are there.
func (b *bucket) wait(now time.Time, n int64) time.Duration {
	b.refill(now)
	return b.fill(b.cost(n))
}

// untilFull is how long from now until the bucket is full again: what the
// providers' reset headers report.
func (b *bucket) untilFull(now time.Time) time.Duration {
	b.refill(now)
	return b.fill(b.capacity)
}

// fill is the time to reach level units, rounded up to the nanosecond.
func (b *bucket) fill(level int64) time.Duration {
	missing := level - b.level
	if missing <= 0 {
		return 0
	}
	return time.Duration((missing + b.perMinute - 1) / b.perMinute)
}
