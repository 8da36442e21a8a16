package coordinator

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"slices"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// A placement is one attempt of a thread on one worker. It has a random
// token, sent only to that worker in the ExecRequest: a spawn, approval
// request, cancel, progress or result about the thread counts only when it
// comes from that worker (the last token of its subject, which the worker's
// credentials pin to its id) with that token. When the attempt ends the
// token is cleared, so a superseded placement's late messages are refused,
// and a lost placement is named in the next heartbeats (fenced) so its
// worker, should it come back, stops the thread at once.

// newToken returns a fresh placement token: 128 random bits.
func newToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// place makes worker wid the thread's current placement under a new token.
func (r *run) place(t *threadRec, wid string) string {
	tok := newToken()
	r.mu.Lock()
	t.worker, t.token = wid, tok
	t.vouched = time.Time{} // a check vouched for the placement before
	r.mu.Unlock()
	return tok
}

// unplace ends the thread's current placement: its token no longer counts.
func (r *run) unplace(t *threadRec) {
	r.mu.Lock()
	t.token = ""
	r.mu.Unlock()
}

// placedOn checks that a message about thread id came from its current
// placement: worker sender, with token. It returns the thread, or the
// error to answer (not found, or fenced).
func (r *run) placedOn(id, sender, token string) (*threadRec, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.placedOnLocked(id, sender, token)
}

// vouch answers a placement check: it confirms that worker sender's
// placement of thread id under token is current and promises to keep it so
// for a loss window, since the worker goes on to act on the answer: the
// placement's silence counts from now. Otherwise it returns the error to
// answer (not found, or fenced).
func (r *run) vouch(id, sender, token string, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.placedOnLocked(id, sender, token)
	if err == nil {
		t.vouched = now
	}
	return err
}

// lapse ends t's current placement because its worker was silent for idle,
// unless a placement check vouched for it since: then it returns when, and
// the placement goes on. Deciding and clearing the token under one lock
// means no check is answered ok for a placement about to be given up.
func (r *run) lapse(t *threadRec, idle time.Duration, now time.Time) (vouched time.Time, lapsed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !t.vouched.IsZero() && now.Sub(t.vouched) < idle {
		return t.vouched, false
	}
	t.token = ""
	return time.Time{}, true
}

func (r *run) placedOnLocked(id, sender, token string) (*threadRec, error) {
	t := r.threads[id]
	switch {
	case t == nil:
		return nil, &wire.Error{Code: wire.CodeNotFound, Message: "thread " + id + " is not in run " + r.id}
	case t.done || t.token == "" || t.worker != sender ||
		subtle.ConstantTimeCompare([]byte(t.token), []byte(token)) != 1:
		return nil, &wire.Error{Code: wire.CodeFenced, Message: "thread " + id + " is not placed on worker " + sender + " under that token"}
	}
	return t, nil
}

// fenceMemory is how many heartbeat intervals a superseded placement is
// named in the coordinator's heartbeats; maxFenced caps the list.
const (
	fenceMemory = 30
	maxFenced   = 1024
)

type fencedEntry struct {
	f  wire.Fenced
	at time.Time
}

// fence remembers a superseded placement for the heartbeats.
func (c *Coordinator) fence(wid, thread string, attempt int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fenced = append(c.fenced, fencedEntry{f: wire.Fenced{Worker: wid, ThreadID: thread, Attempt: attempt}, at: c.cfg.Now()})
	if len(c.fenced) > maxFenced {
		c.fenced = c.fenced[len(c.fenced)-maxFenced:]
	}
}

// fencedNow returns the superseded placements still worth naming.
func (c *Coordinator) fencedNow() []wire.Fenced {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := c.cfg.Now().Add(-fenceMemory * c.cfg.HeartbeatInterval)
	c.fenced = slices.DeleteFunc(c.fenced, func(e fencedEntry) bool { return !e.at.After(cutoff) })
	if len(c.fenced) == 0 {
		return nil
	}
	out := make([]wire.Fenced, len(c.fenced))
	for i, e := range c.fenced {
		out[i] = e.f
	}
	return out
}

// refuse answers a message that did not prove its authority and logs why.
func (c *Coordinator) refuse(subject string, err error) {
	c.cfg.Logger.Warn("refused message", "subject", subject, "reason", err)
}
