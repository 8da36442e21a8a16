package runner

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
)

// callNotice tells a thread's watchers what one model call of the thread
// waits for, with the event model.waiting: status waiting and the reason
// when the call starts to wait, status running when it goes on. A call
// waits
//
//   - for its endpoint's quota (model.QuotaNotice): the reason is
//     "waiting for quota of <endpoint>: <why>", and the call goes on when it
//     got its share. The wait is passed on to the notice already in the
//     call's context (a worker's, which lends the thread's slot out
//     meanwhile).
//   - before retrying a failed attempt (model.RetryNotice): the reason is
//     "retrying: <cause>, <wait>" (retryReason), and the call goes on when
//     that wait is over. The retry is also logged at warn and told to the
//     Observer (a metric).
//
// Whatever it waits for, the call has gone on once it ends (ended), so a
// thread's row never keeps a wait past its call.
type callNotice struct {
	st    *threadState
	inner model.QuotaNotice

	mu       sync.Mutex
	shown    bool   // a wait was reported and its end not yet
	endpoint string // whose quota the shown wait is for; empty for a retry
	gen      int    // counts the waits, so the timer of an earlier one stays quiet
	timer    *time.Timer
}

// Retrying reports the wait before retry number retry of the call.
func (n *callNotice) Retrying(ctx context.Context, err error, retry int, wait time.Duration) {
	provider := n.st.ref.Provider
	n.st.r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "model call retried",
		slog.String("run_id", n.st.th.RunID), slog.String("thread_id", n.st.th.ID),
		slog.String("provider", provider), slog.String("model", n.st.ref.Name), slog.Int("status", model.StatusOf(err)),
		slog.Int("attempt", retry+1), slog.Duration("wait", wait), slog.String("reason", model.RetryReason(err)),
		slog.String("error", err.Error()))
	if obs := n.st.r.cfg.Observer; obs != nil {
		obs.ModelRetry(provider, model.RetryReason(err))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	gen := n.waitLocked("", retryReason(err, wait))
	if wait <= 0 {
		n.goneOnLocked() // the retry goes out at once
		return
	}
	// Retry sleeps as long before the attempt goes out.
	n.timer = time.AfterFunc(wait, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.gen == gen {
			n.goneOnLocked()
		}
	})
}

// Waiting reports that the call waits for endpoint's quota.
func (n *callNotice) Waiting(ctx context.Context, endpoint, reason string) {
	n.mu.Lock()
	n.waitLocked(endpoint, event.WaitingForQuota+" of "+endpoint+": "+reason)
	n.mu.Unlock()
	n.st.r.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "model call waits for quota",
		slog.String("run_id", n.st.th.RunID), slog.String("thread_id", n.st.th.ID),
		slog.String("endpoint", endpoint), slog.String("reason", reason))
	if n.inner != nil {
		n.inner.Waiting(ctx, endpoint, reason)
	}
}

// Resumed reports that the call got its share of the quota.
func (n *callNotice) Resumed(ctx context.Context) error {
	if n.inner != nil {
		if err := n.inner.Resumed(ctx); err != nil {
			return err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked()
	n.shown = true // reported even if no wait was (as it always was)
	n.goneOnLocked()
	return nil
}

// ended reports the end of a wait the call may still show: the call is
// over (answered or failed).
func (n *callNotice) ended() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked()
	n.goneOnLocked()
}

// waitLocked reports a wait for endpoint's quota (or, with no endpoint, a
// retry's) and returns its number; it ends the one before.
func (n *callNotice) waitLocked(endpoint, reason string) int {
	n.stopLocked()
	e := n.st.th.Event(event.ModelWaiting)
	e.Model, e.Endpoint, e.Status, e.Reason = n.st.ref.String(), endpoint, event.Waiting, reason
	n.st.r.emit(e)
	n.shown, n.endpoint = true, endpoint
	return n.gen
}

// stopLocked forgets the timer of the wait shown, if it has one.
func (n *callNotice) stopLocked() {
	n.gen++
	if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
}

// goneOnLocked reports that the call goes on, if a wait is shown.
func (n *callNotice) goneOnLocked() {
	if !n.shown {
		return
	}
	e := n.st.th.Event(event.ModelWaiting)
	e.Model, e.Endpoint, e.Status = n.st.ref.String(), n.endpoint, event.Running
	n.st.r.emit(e)
	n.shown = false
}

// retryReason is the reason of a wait before a retry: "retrying: 429, 2s",
// the failure's cause (retryCause) and the wait, rounded (retryWait); a
// retry that goes out at once has no wait ("retrying: 429").
func retryReason(err error, wait time.Duration) string {
	r := event.WaitingToRetry + ": " + retryCause(err)
	if wait > 0 {
		r += ", " + retryWait(wait).String()
	}
	return r
}

// retryCause names what a failed attempt met: its HTTP status ("429",
// "503") or, without one, what became of the connection ("timeout",
// "connection reset", "connection refused", "connection closed", "stalled",
// "stream cut"), else the kind of failure ("rate limited", "server error").
// Providers keep a transport failure's text, not the error itself, so the
// text is what tells.
func retryCause(err error) string {
	if s := model.StatusOf(err); s != 0 {
		return strconv.Itoa(s)
	}
	msg := err.Error()
	for _, c := range []struct{ in, cause string }{
		{"stalled", "stalled"},
		{"stream ended before its final event", "stream cut"},
		{"connection reset", "connection reset"},
		{"broken pipe", "connection reset"},
		{"connection refused", "connection refused"},
		{"timeout", "timeout"},
		{"deadline exceeded", "timeout"},
		{"EOF", "connection closed"},
	} {
		if strings.Contains(msg, c.in) {
			return c.cause
		}
	}
	return strings.ReplaceAll(model.RetryReason(err), "_", " ")
}

// retryWait rounds a retry's wait to what a person reads: whole
// milliseconds below a second (at least 1ms), tenths of a second below ten
// seconds, whole seconds above: 500ms, 2s, 1.5s, 1m30s.
func retryWait(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return max(d.Round(time.Millisecond), time.Millisecond)
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
