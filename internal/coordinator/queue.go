package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/wire"
)

// consume takes submissions from the durable queue, one per run slot, for as
// long as the coordinator runs. Each of Config.MaxRuns + Config.MaxIdleRuns
// consumers holds at most one run, and takes one only with a free run slot
// (slots.go), so a busy coordinator leaves the rest of the queue to others.
//
// Runs go on in ctx; taking new ones stops with c.taking (Drain).
func (c *Coordinator) consume(ctx context.Context) {
	for c.taking.Err() == nil {
		slot, ok := c.takeSlot(c.taking)
		if !ok {
			continue
		}
		sub, err := c.cfg.Store.Next(c.taking)
		if err != nil {
			slot.give()
			if c.taking.Err() == nil {
				c.cfg.Logger.Warn("queue", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		stop := c.giveBackWhenIdle(sub.Sub.RunID, slot)
		c.runQueued(ctx, sub)
		stop()
		slot.give()
	}
}

// runQueued runs one submission and acks it only once its final record is
// stored. A run whose record is already final was finished by an earlier
// attempt (the ack was lost): it is acked, never run again.
func (c *Coordinator) runQueued(ctx context.Context, s *store.Submission) {
	st := c.cfg.Store
	sub := s.Sub
	sub.Timeout = cmp.Or(sub.Timeout, c.cfg.RunTimeout)
	// Until the run starts and its lease is held, the submission is kept
	// in progress by the queue's own clock.
	stop := st.KeepInProgress(ctx, s)
	defer stop()

	cur, _, err := st.GetRecord(ctx, sub.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Enqueued by someone who wrote no record: start one.
		if _, err := st.CreateRecord(ctx, store.SubmittedRecord(sub, c.cfg.Now())); err != nil && !errors.Is(err, store.ErrExists) {
			c.retryLater(ctx, s, "create run record", err)
			return
		}
	case err != nil:
		c.retryLater(ctx, s, "read run record", err)
		return
	case cur.Status.Final():
		// Its webhook calls may not be kept yet: its coordinator may have
		// died between the record and the ack.
		c.ackFinished(ctx, s)
		return
	case cur.CancelRequested != "":
		// Cancelled while no coordinator ran it: it never starts again.
		c.endQueued(ctx, s, event.Cancelled, cur.CancelRequested)
		return
	case s.LastDelivery() && s.Delivered() > 1:
		// Every earlier delivery ended with its coordinator gone: this one
		// settles the run for good rather than risk leaving it running.
		c.endQueued(ctx, s, event.Failed, fmt.Sprintf("gave up after %d deliveries: the run's coordinator stopped before it finished, each time", s.Delivered()))
		return
	}
	err = c.placeCwd(&sub)
	var rn *run
	if err == nil {
		rn, err = c.open(&sub)
	}
	if err != nil && c.run(sub.RunID) != nil {
		// Given back to the queue while an earlier execution here, which
		// lost its lease, still winds down: taken again once it is gone.
		c.retryLater(ctx, s, "run still ending here", err)
		return
	}
	if err != nil {
		c.cfg.Logger.Warn("refused queued run", "run_id", sub.RunID, "err", err)
		if !c.accepting() {
			s.Nak(ctx, 0)
			return
		}
		c.finishRecord(ctx, sub.RunID, 0, func(r *record.Run) {
			r.Status, r.Error, r.FinishedAt = event.Failed, err.Error(), c.cfg.Now()
		})
		c.ackFinished(ctx, s)
		return
	}
	defer c.close(rn)
	// A client's cancel sent while no coordinator could record it. Read
	// once the run is registered here: a cancel asked after this read
	// reaches this coordinator as the run's owner.
	asked, err := st.CancelRequested(ctx, sub.RunID, cur.Resumes)
	if err != nil {
		c.retryLater(ctx, s, "read cancel request", err)
		return
	}
	if asked {
		c.endQueued(ctx, s, event.Cancelled, CancelledByUser)
		return
	}
	rn.trace = tracing.Carry(s.Header())
	reason := CancelledByUser
	started, err := st.UpdateRecord(ctx, sub.RunID, func(r *record.Run) error {
		if r.CancelRequested != "" || r.Status.Final() {
			// Cancelled meanwhile, before it started.
			if r.CancelRequested != "" {
				reason = r.CancelRequested
			}
			return errCancelRequested
		}
		if id := tracing.TraceIDOf(rn.trace); id != "" {
			r.TraceID = id
		}
		r.Attempts++
		r.Status, r.StartedAt, r.Coordinator = event.Running, c.cfg.Now(), c.cfg.ID
		r.Budget = rn.budget.Root().Use()
		return nil
	})
	if errors.Is(err, errCancelRequested) {
		c.endQueued(ctx, s, event.Cancelled, reason)
		return
	}
	if err != nil {
		c.retryLater(ctx, s, "start run record", err)
		return
	}
	stop()
	attempt := started.Attempts
	lease, err := c.holdLease(ctx, s, rn, attempt)
	if err != nil {
		c.retryLater(ctx, s, "hold run lease", err)
		return
	}
	rn.lease.Store(lease)
	defer lease.release(ctx)
	c.cfg.Logger.Info("run started", "run_id", sub.RunID, "attempt", attempt, "trace_id", started.TraceID)
	if s.Delivered() > 1 {
		c.cfg.Metrics.Redelivered()
	} else {
		c.cfg.Metrics.RunSubmitted()
	}
	if !started.CreatedAt.IsZero() {
		c.cfg.Metrics.QueueWaited(started.StartedAt.Sub(started.CreatedAt))
	}

	begun := time.Now()
	stopLive := c.liveBudget(ctx, sub.RunID, rn, attempt)
	rec := c.execute(rn, sub, attempt > 1)
	stopLive()
	ctx = context.WithoutCancel(ctx)
	left := func(cause error) {
		// Another coordinator holds the run now: leave it all to it.
		c.cfg.Logger.Warn("run left to the coordinator that took it over", "run_id", sub.RunID, "attempt", attempt, "reason", cause)
	}
	switch cause := context.Cause(rn.ctx); {
	case errors.Is(cause, errFenced):
		left(cause)
		return
	case errors.Is(cause, errStopping):
		c.cfg.Logger.Info("run handed back to the queue", "run_id", sub.RunID, "trace_id", rec.TraceID)
		// Shutting down: hand the run to the next coordinator untouched.
		err := c.finishRecord(ctx, sub.RunID, attempt, func(r *record.Run) { r.Status = record.Queued })
		if err == nil {
			s.Nak(ctx, 0)
		} else if errors.Is(err, errFenced) {
			left(err)
		}
		return
	}
	if err := c.finishRecord(ctx, sub.RunID, attempt, c.final(rec)); err != nil {
		if errors.Is(err, errFenced) {
			left(err)
		}
		return
	}
	c.logFinished(rec, attempt, time.Since(begun))
	c.ackFinished(ctx, s)
}

// logFinished logs a run's end: the line to look for by run_id.
func (c *Coordinator) logFinished(rec record.Run, attempts int, d time.Duration) {
	level := slog.LevelInfo
	if rec.Status != event.Succeeded {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("run_id", rec.RunID), slog.String("status", string(rec.Status)),
		slog.Duration("duration", d), slog.Int("attempts", attempts), slog.Int("threads", len(rec.Threads)),
		slog.Int64("input_tokens", rec.Usage.InputTokens), slog.Int64("output_tokens", rec.Usage.OutputTokens)}
	if rec.Error != "" {
		attrs = append(attrs, slog.String("error", rec.Error))
	}
	if rec.TraceID != "" {
		attrs = append(attrs, slog.String("trace_id", rec.TraceID))
	}
	c.cfg.Logger.LogAttrs(context.Background(), level, "run finished", attrs...)
}

// errCancelRequested stops a run from starting: it was cancelled meanwhile.
var errCancelRequested = errors.New("cancel requested")

// endQueued settles a submission that is not run: its record final with
// status and reason, the message acked.
func (c *Coordinator) endQueued(ctx context.Context, s *store.Submission, status event.Status, reason string) {
	ctx = context.WithoutCancel(ctx)
	if status == event.Cancelled && reason == "" {
		reason = "cancelled"
	}
	c.cfg.Logger.Info("run settled without running", "run_id", s.Sub.RunID, "status", status, "reason", reason)
	c.finishRecord(ctx, s.Sub.RunID, 0, func(r *record.Run) {
		if !r.Status.Final() {
			r.Status, r.Error, r.FinishedAt, r.CancelRequested = status, reason, c.cfg.Now(), ""
		}
	})
	c.ackFinished(ctx, s)
}

// budgetEvery is how often a running run's record shows its budget use.
const budgetEvery = 2 * time.Second

// liveBudget keeps the budget use in the record of a running run up to
// date, every budgetEvery while it changes, until stop is called.
func (c *Coordinator) liveBudget(ctx context.Context, id string, rn *run, attempt int) (stop func()) {
	last := rn.budget.Root().Use()
	return repeat(ctx, budgetEvery, func() bool {
		use := rn.budget.Root().Use()
		if maps.Equal(use, last) {
			return true
		}
		last = use
		_, err := c.cfg.Store.UpdateRecord(ctx, id, func(r *record.Run) error {
			if r.Status != event.Running || r.Attempts != attempt {
				return errNotRunning
			}
			r.Budget = use
			return nil
		})
		if err != nil && !errors.Is(err, errNotRunning) {
			c.cfg.Logger.Warn("budget use in the run record", "run_id", id, "err", err)
		}
		return true
	})
}

var errNotRunning = errors.New("run no longer running")

// retryLater gives a submission back to the queue after a store error, or,
// on its last delivery, fails the run for good: a message past its last
// delivery would otherwise stay in the queue forever.
func (c *Coordinator) retryLater(ctx context.Context, s *store.Submission, what string, err error) {
	c.cfg.Logger.Warn(what, "run_id", s.Sub.RunID, "delivery", s.Delivered(), "err", err)
	ctx = context.WithoutCancel(ctx)
	if !s.LastDelivery() {
		s.Nak(ctx, time.Second)
		return
	}
	reason := fmt.Sprintf("gave up after %d deliveries: %s: %v", s.Delivered(), what, err)
	c.finishRecord(ctx, s.Sub.RunID, 0, func(r *record.Run) {
		r.Status, r.Error, r.FinishedAt = event.Failed, reason, c.cfg.Now()
	})
	if err := c.keepWebhooks(ctx, s.Sub); err != nil {
		c.cfg.Logger.Warn("keep the run's webhook calls", "run_id", s.Sub.RunID, "err", err)
	}
	s.Term(ctx, reason)
}

// finishRecord updates a run record, retrying for a while: the ack waits on
// it. With attempt above 0 it is fenced: a record started by a later
// attempt (another coordinator took the run over) is left alone, and
// errFenced returned.
func (c *Coordinator) finishRecord(ctx context.Context, id string, attempt int, fn func(*record.Run)) error {
	var err error
	for try := 0; try < 10; try++ {
		_, err = c.cfg.Store.UpdateRecord(ctx, id, func(r *record.Run) error {
			if attempt > 0 && r.Attempts != attempt {
				return fmt.Errorf("%w: the record is at attempt %d, this coordinator ran attempt %d", errFenced, r.Attempts, attempt)
			}
			fn(r)
			return nil
		})
		if err == nil || errors.Is(err, errFenced) {
			return err
		}
		c.cfg.Logger.Warn("update run record", "run_id", id, "err", err)
		sleep(ctx, time.Duration(try+1)*200*time.Millisecond)
	}
	return err
}

// repeat calls f every d, on a goroutine of its own, until f returns
// false, ctx ends or stop is called; stop returns once it is over.
func repeat(ctx context.Context, d time.Duration, f func() bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ticks(ctx.Done(), d, f) })
	return func() { cancel(); wg.Wait() }
}

// ticks calls f every d until f returns false or done is closed.
func ticks(done <-chan struct{}, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if !f() {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// final is the update that stores a finished run's record over its
// stored one, keeping what was submitted and when.
func (c *Coordinator) final(rec record.Run) func(*record.Run) {
	return func(r *record.Run) {
		keep := *r
		*r = rec
		r.Task, r.Spec, r.Agents, r.Model = keep.Task, keep.Spec, keep.Agents, keep.Model
		r.MaxDepth, r.MaxThreads = keep.MaxDepth, keep.MaxThreads
		r.Cwd, r.Resumes = keep.Cwd, keep.Resumes
		r.SubmittedBudget, r.Timeout = keep.SubmittedBudget, keep.Timeout
		r.Attempts, r.CreatedAt, r.StartedAt, r.FinishedAt = keep.Attempts, keep.CreatedAt, keep.StartedAt, c.cfg.Now()
		if keep.CancelRequested != "" && r.Status == event.Succeeded {
			// A cancel was answered 202 while the run ran: the run does not
			// end succeeded, even if its root finished before the cancel
			// reached it.
			r.Status, r.Error = event.Cancelled, keep.CancelRequested
		}
	}
}

// placeCwd sets where a submitted run's tools act, queued or direct: the
// root agent's harness.cwd, relative to the coordinator's --cwd (or to the
// directory the submission names), and never outside --cwd.
func (c *Coordinator) placeCwd(sub *wire.RunSubmit) error {
	root, err := filepath.Abs(c.cfg.Cwd)
	if err != nil {
		return fmt.Errorf("coordinator --cwd %q: %w", c.cfg.Cwd, err)
	}
	dir, err := thread.ResolveCwd(cmp.Or(sub.Cwd, root), sub.Agent.Harness.Cwd)
	if err != nil {
		return err
	}
	if outside(root, dir) {
		if sub.Cwd != "" && sub.Agent.Harness.Cwd == "" {
			return fmt.Errorf("cwd %s is outside the coordinator's --cwd %s", dir, root)
		}
		return fmt.Errorf("harness.cwd %q is outside the coordinator's --cwd %s", sub.Agent.Harness.Cwd, root)
	}
	// Through symlinks too, where the directory exists already.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		if realRoot, err := filepath.EvalSymlinks(root); err == nil && outside(realRoot, real) {
			return fmt.Errorf("harness.cwd %q leads outside the coordinator's --cwd %s", sub.Agent.Harness.Cwd, root)
		}
	}
	sub.Cwd = dir
	return nil
}

// outside says whether dir is outside root.
func outside(root, dir string) bool {
	rel, err := filepath.Rel(root, dir)
	return err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
