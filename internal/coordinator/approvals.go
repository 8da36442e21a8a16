package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// holdApproval keeps an `ask` of a queued run (nobody is attached to answer
// it) in the approvals bucket for a person to decide through the HTTP API or
// the CLI, and waits for the decision, denying after ApprovalTimeout.
//
// timedOut says the denial came from the timeout, not a person.
func (c *Coordinator) holdApproval(ctx context.Context, req policy.ApprovalRequest) (_ policy.Approval, timedOut bool) {
	a := store.Approval{
		ID: c.cfg.NewID(), RunID: req.RunID, ThreadID: req.ThreadID, ThreadPath: req.ThreadPath,
		Tool: req.Tool, Arguments: req.Arguments, Coordinator: c.cfg.ID, RequestedAt: c.cfg.Now(),
	}
	decided := make(chan store.Approval, 1)
	c.mu.Lock()
	c.decisions[a.ID] = decided
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.decisions, a.ID)
		c.mu.Unlock()
	}()
	if err := c.cfg.Store.PutApproval(ctx, a); err != nil {
		return policy.Approval{Reason: "could not hold the approval: " + err.Error()}, false
	}
	timer := time.NewTimer(c.cfg.ApprovalTimeout)
	defer timer.Stop()
	select {
	case d := <-decided:
		return policy.Approval{Allow: d.Decision == "allow", Reason: d.Reason}, false
	case <-timer.C:
		reason := fmt.Sprintf("no decision within %v", c.cfg.ApprovalTimeout)
		d, err := c.cfg.Store.Decide(context.WithoutCancel(ctx), a.ID, false, reason)
		if errors.Is(err, store.ErrDecided) {
			// Decided in the same instant: honour the person's answer.
			return policy.Approval{Allow: d.Decision == "allow", Reason: d.Reason}, false
		}
		return policy.Approval{Reason: reason}, true
	case <-ctx.Done():
		c.cfg.Store.Decide(context.WithoutCancel(ctx), a.ID, false, "the run ended")
		return policy.Approval{Reason: "the run ended"}, false
	}
}

// watchApprovals hands decisions on this coordinator's held approvals to the
// threads waiting for them, whichever coordinator or client recorded them.
func (c *Coordinator) watchApprovals(ctx context.Context) {
	defer c.loops.Done()
	for ctx.Err() == nil {
		ch, err := c.cfg.Store.WatchApprovals(ctx)
		if err != nil {
			c.cfg.Logger.Warn("watch approvals", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		for a := range ch {
			if a.Decision == "" || a.Coordinator != c.cfg.ID {
				continue
			}
			c.mu.Lock()
			w := c.decisions[a.ID]
			c.mu.Unlock()
			if w != nil {
				select {
				case w <- a:
				default:
				}
			}
		}
	}
}

// deniedByUser is the reason of a person's denial.
const deniedByUser = "denied by a user"

// handleDecide records a person's decision on a held approval, whichever
// coordinator holds it (that one's watch hands it to the waiting thread).
// It is the only way a decision enters: the HTTP API and the CLI both ask
// here, and clients have no write access to the approvals bucket.
func (c *Coordinator) handleDecide(_ context.Context, m wire.Msg, r transport.Replier) {
	var d wire.ApprovalDecide
	if err := wire.DecodeAs(m.Data, wire.TypeApprovalDecide, &d); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	reason := deniedByUser
	if d.Allow {
		reason = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.cfg.Store.Decide(ctx, d.ID, d.Allow, reason)
	switch {
	case err == nil:
		r.Reply(wire.Message(wire.TypeOK, struct{}{}))
		return
	case errors.Is(err, store.ErrNotFound):
		err = &wire.Error{Code: wire.CodeNotFound, Message: err.Error()}
	case errors.Is(err, store.ErrDecided):
		err = &wire.Error{Code: wire.CodeConflict, Message: err.Error()}
	case errors.Is(err, store.ErrInvalidID):
		err = &wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}
	}
	r.Reply(wire.ErrorReply(err))
}
