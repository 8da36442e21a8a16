package quota

import (
	"time"
)

// Snapshot is a limiter's state at one moment, for dashboards and metrics.
type Snapshot struct {
	Name string
	// Queued is the calls waiting; InFlight the calls granted and not done.
	Queued, InFlight int
	// Declared is what the operator declared; Learned what the answers
	// taught.
	Declared Limits
	Learned  Learned
	// PausedUntil is when the provider's last Retry-After ends (zero or
	// past: no pause).
	PausedUntil time.Time
	// Waiting says why the first queued call waits ("" when none does).
	Waiting string
	// Grants counts the tickets handed out, Refusals the 429s answered,
	// Waits the calls that had to queue and WaitTime their time queued.
	Grants, Refusals, Waits uint64
	WaitTime                time.Duration
}

// Learned is what a limiter learned of its provider's quota.
type Learned struct {
	// RequestsPerMinute is the provider's request limit: its header's, or
	// else the pace measured from its refusals; 0 unknown.
	RequestsPerMinute float64
	// The token limits the provider's headers gave; 0 unknown.
	TokensPerMinute, InputTokensPerMinute, OutputTokensPerMinute int64
}

// Snapshot returns the limiter's state now.
func (l *Limiter) Snapshot() Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Snapshot{
		Name: l.name, Queued: l.queue.len(), InFlight: l.inFlight, Declared: l.declared,
		PausedUntil: l.pausedUntil, Waiting: l.blocked,
		Grants: l.grants, Refusals: l.refusals, Waits: l.waits, WaitTime: l.waited,
		Learned: Learned{
			TokensPerMinute: l.hdr[tokB], InputTokensPerMinute: l.hdr[inB], OutputTokensPerMinute: l.hdr[outB],
		},
	}
	switch {
	case l.hdr[reqB] > 0:
		s.Learned.RequestsPerMinute = float64(l.hdr[reqB])
	case l.aimd > 0:
		s.Learned.RequestsPerMinute = l.aimd * 60
	}
	return s
}
