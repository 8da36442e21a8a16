package quota

import "time"

// The states of a grant in the log.
const (
	pending  uint8 = iota // granted, not answered yet
	accepted              // answered, not refused: it used the provider's quota
	refused               // answered 429
	void                  // given back unsent, or released with its owner
)

// grantLog keeps the recent grants in order, with what became of them, so
// the limiter can measure the rate the provider accepts when all it says
// is "no" (see rateBefore).
type grantLog struct {
	base    uint64 // sequence number of entries[0]
	entries []logEntry
}

type logEntry struct {
	at    time.Time
	state uint8
}

const (
	// logHorizon and logMax bound the log: the measures use seconds of it.
	logHorizon = time.Minute
	logMax     = 1 << 13
)

// add logs a grant at now and returns its sequence number.
func (g *grantLog) add(now time.Time) uint64 {
	// Drop old entries in chunks, so adding stays cheap on average.
	drop := 0
	if len(g.entries) >= logMax {
		drop = logMax / 4
	}
	for drop < len(g.entries) && now.Sub(g.entries[drop].at) > logHorizon {
		drop++
	}
	if drop >= 64 || len(g.entries) >= logMax {
		g.entries = append(g.entries[:0], g.entries[drop:]...)
		g.base += uint64(drop)
	}
	g.entries = append(g.entries, logEntry{at: now})
	return g.base + uint64(len(g.entries)-1)
}

// get is the entry of seq, or nil when it left the log.
func (g *grantLog) get(seq uint64) *logEntry {
	if seq < g.base || seq-g.base >= uint64(len(g.entries)) {
		return nil
	}
	return &g.entries[seq-g.base]
}

// rateBefore measures the provider's rate, in requests a second, from a
// refusal: the provider's bucket was empty when the refused call seq
// arrived, and was empty too when an earlier refused call arrived, so the
// calls it accepted in between are what it refilled in that time (less
// what overflowed a full bucket: the measure is a lower bound). The
// earlier refusal is the latest one between span and maxSpan before;
// anchored reports whether there is one. Without one, the measure counts
// the calls accepted in the last span, and overstates the rate by what the
// provider's bucket held at its start, which the next refusal corrects.
// Grants are taken by time, not by order, since calls granted at once
// reach the provider in any order; calls not answered yet count as
// accepted. ok is false with nothing to measure.
func (g *grantLog) rateBefore(seq uint64, span, maxSpan time.Duration) (rate float64, anchored, ok bool) {
	e := g.get(seq)
	if e == nil {
		return 0, false, false
	}
	t2 := e.at
	end := int(seq - g.base)
	for end+1 < len(g.entries) && !g.entries[end+1].at.After(t2) {
		end++
	}
	t1 := t2.Add(-span)
	for j := end; j >= 0; j-- {
		x := g.entries[j]
		if d := t2.Sub(x.at); d > maxSpan {
			break
		} else if x.state == refused && d >= span {
			t1, anchored = x.at, true
			break
		}
	}
	if !anchored && t1.Before(g.entries[0].at) {
		t1 = g.entries[0].at.Add(-time.Nanosecond)
	}
	n := 0
	for j := end; j >= 0 && g.entries[j].at.After(t1); j-- {
		if x := g.entries[j]; x.state == accepted || x.state == pending {
			n++
		}
	}
	if n == 0 {
		return 0, anchored, false
	}
	return float64(n) / max(t2.Sub(t1), span/10).Seconds(), anchored, true
}

// acceptedAround counts the accepted calls granted within window of seq's
// grant: the provider held at least that many at once (less its refill in
// window, which is negligible).
func (g *grantLog) acceptedAround(seq uint64, window time.Duration) int {
	e := g.get(seq)
	if e == nil {
		return 0
	}
	n := 0
	for _, x := range g.entries {
		if d := x.at.Sub(e.at); x.state == accepted && d >= -window && d <= window {
			n++
		}
	}
	return n
}
