package coordinator

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/submission"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/wire"
)

// Clients submit, cancel and resume queued runs by asking a coordinator:
// coordinators are the only writers of run records and of the queue. Each
// request is answered OK (or RunAccepted), or an error coded bad_request,
// not_found or conflict; anything else is internal.

// requestTimeout bounds the store work one client request does.
const requestTimeout = 15 * time.Second

// CancelledByUser is the reason recorded for a cancel a person asked for.
const CancelledByUser = wire.CancelledByUser

// handleEnqueue queues a submission: checked here against this
// coordinator's own ceilings (whatever the client checked), its queued
// record written and the submission published to the queue. The same id
// with the same submission is the same run; with another, a conflict.
func (c *Coordinator) handleEnqueue(m wire.Msg, sub *wire.RunSubmit) (wire.Msg, error) {
	if sub.RunID == "" {
		sub.RunID = c.cfg.NewID()
	}
	// A queued run's `ask` decisions wait for a person in the approvals
	// bucket; nobody attached answers them.
	sub.Approver = ""
	if err := submission.Check(*sub, submission.Options{Ceilings: c.cfg.Ceilings}); err != nil {
		return wire.Msg{}, &wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}
	}
	if err := c.checkSubmittedWebhooks(*sub); err != nil {
		return wire.Msg{}, err
	}
	// The run's trace is the submitter's, when it sent one.
	ctx, cancel := context.WithTimeout(tracing.Extract(context.Background(), m.Header), requestTimeout)
	defer cancel()
	if _, err := c.cfg.Store.Enqueue(ctx, *sub); err != nil {
		return wire.Msg{}, storeError(err)
	}
	return wire.Message(wire.TypeRunAccepted, wire.RunAccepted{RunID: sub.RunID, Coordinator: c.cfg.ID}), nil
}

// handleCancelRequest cancels a whole run for a client: a queued run is
// ended before it starts, a running one gets the cancel in its record (so
// a coordinator that picks it up after its owner died honours it) and its
// owner is told on SubjectRunCancel.
func (c *Coordinator) handleCancelRequest(_ wire.Msg, rc *wire.RunCancel) (wire.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, err := c.updateAsked(ctx, rc.RunID, func(rec *record.Run) *wire.Error {
		switch {
		case rec.Status.Final():
			return &wire.Error{Code: wire.CodeConflict, Message: "run " + rc.RunID + " already " + string(rec.Status)}
		case rec.Status == record.Queued:
			rec.Status, rec.Error, rec.FinishedAt = event.Cancelled, "cancelled before it started", c.cfg.Now()
		default:
			rec.CancelRequested = CancelledByUser
		}
		return nil
	})
	if err != nil {
		return wire.Msg{}, err
	}
	cn := wire.Cancel{RunID: rc.RunID, Reason: CancelledByUser}
	if err := c.tr.Publish(ctx, wire.SubjectRunCancel, wire.Message(wire.TypeCancel, cn)); err != nil {
		c.cfg.Logger.Warn("tell the run's owner of a cancel", "run_id", rc.RunID, "err", err)
	}
	return okReply, nil
}

// handleResume queues a failed or cancelled run again under its id. The
// coordinator that takes it reads its journal first, so finished threads
// are reused and failed ones carry on from their last good turn.
func (c *Coordinator) handleResume(_ wire.Msg, rr *wire.RunResume) (wire.Msg, error) {
	id := rr.RunID
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var sub wire.RunSubmit
	rec, err := c.updateAsked(ctx, id, func(r *record.Run) *wire.Error {
		if r.Status != event.Failed && r.Status != event.Cancelled {
			return &wire.Error{Code: wire.CodeConflict, Message: "run " + id + " is " + string(r.Status) + "; only failed or cancelled runs resume"}
		}
		if r.Spec == nil {
			return &wire.Error{Code: wire.CodeConflict, Message: "run " + id + " has no submitted spec to resume"}
		}
		sub = wire.RunSubmit{RunID: id, Task: r.Task, Agent: *r.Spec, Agents: r.Agents, Cwd: r.Cwd,
			Limits: limits.Config{MaxDepth: r.MaxDepth, MaxThreads: r.MaxThreads}, Budget: r.SubmittedBudget, Timeout: r.Timeout,
			Webhooks: r.Webhooks}
		r.Resumes++
		r.Status, r.Error, r.Output, r.CancelRequested = record.Queued, "", "", ""
		r.FinishedAt = time.Time{}
		return nil
	})
	if err != nil {
		return wire.Msg{}, err
	}
	// Its own message id: the queue drops a second copy under the run id.
	if err := c.cfg.Store.Requeue(ctx, sub, id+"-resume-"+strconv.Itoa(rec.Resumes)); err != nil {
		return wire.Msg{}, storeError(err)
	}
	return okReply, nil
}

// updateAsked updates the record of run id with fn for a client, and says
// what to answer when it could not: fn's refusal said as it is, without
// the store's words around it, not found, or the store's error.
func (c *Coordinator) updateAsked(ctx context.Context, id string, fn func(*record.Run) *wire.Error) (record.Run, error) {
	if err := ids.Check(id); err != nil {
		return record.Run{}, &wire.Error{Code: wire.CodeBadRequest, Message: "run " + err.Error()}
	}
	var refused *wire.Error
	rec, err := c.cfg.Store.UpdateRecord(ctx, id, func(r *record.Run) error {
		if refused = fn(r); refused != nil {
			return refused
		}
		return nil
	})
	switch {
	case refused != nil:
		return rec, refused
	case errors.Is(err, store.ErrNotFound):
		return rec, &wire.Error{Code: wire.CodeNotFound, Message: "run " + id + " not found"}
	case err != nil:
		return rec, storeError(err)
	}
	return rec, nil
}

// storeError gives a store error the code a client tells apart.
func storeError(err error) error {
	code := wire.CodeInternal
	switch {
	case errors.Is(err, store.ErrNotFound):
		code = wire.CodeNotFound
	case errors.Is(err, store.ErrIDTaken), errors.Is(err, store.ErrDecided):
		code = wire.CodeConflict
	case errors.Is(err, store.ErrInvalidID), errors.Is(err, store.ErrTooLarge):
		code = wire.CodeBadRequest
	}
	return &wire.Error{Code: code, Message: err.Error()}
}
