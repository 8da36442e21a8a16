package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// handleApproval asks the run's approver and answers the worker, denying when
// nobody answers in time.
func (c *Coordinator) handleApproval(_ context.Context, m wire.Msg, r transport.Replier) {
	var wreq wire.ApprovalRequest
	if err := wire.DecodeAs(m.Data, wire.TypeApprovalRequest, &wreq); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	rn, t, err := c.placedThread(wreq.RunID, wreq.ThreadID, m.Subject, wreq.Token)
	if err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	// The worker's events, its approval.requested among them, are published
	// once the approval is held: whoever sees one can list the approval.
	announce := sync.OnceFunc(func() { c.relay(rn, t, wreq.Events, m.Subject) })
	defer announce()
	req := wreq.ApprovalRequest
	req.ThreadPath = t.thread.Path // the tree here names the caller, not the request
	ping := c.alive.add(r, req.ThreadID)
	defer c.alive.remove(ping)
	r.Reply(wire.Message(wire.TypeApprovalDecision, c.approval(rn, req, announce)))
}

// approval is the decision of req, asked once per tool call: a request
// for a call already asked about (sent again after its worker's connection
// moved, its first or its answer maybe lost) waits for the same decision,
// or has it at once.
//
// announce is called once the request is held or about to be asked.
func (c *Coordinator) approval(rn *run, req policy.ApprovalRequest, announce func()) policy.Approval {
	if req.CallID == "" {
		return c.ask(rn, req, announce)
	}
	d, first := rn.decisionOf(req.ThreadID, req.CallID)
	if first {
		d.a = c.ask(rn, req, announce)
		close(d.done)
		return d.a
	}
	announce()
	select {
	case <-d.done:
		return d.a
	case <-rn.ctx.Done():
		return policy.Approval{Reason: "the run ended"}
	}
}

// ask asks the run's approver, or holds the approval for a person to
// decide, denying when nobody answers in time.
func (c *Coordinator) ask(rn *run, req policy.ApprovalRequest, announce func()) policy.Approval {
	asked := time.Now()
	c.cfg.Metrics.ApprovalAsked()
	decide := func(a policy.Approval, timedOut bool) policy.Approval {
		decision := metrics.DecisionDeny
		switch {
		case a.Allow:
			decision = metrics.DecisionAllow
		case timedOut:
			decision = metrics.DecisionTimeout
		}
		c.cfg.Metrics.ApprovalAnswered(decision, time.Since(asked))
		return a
	}
	if rn.approver == "" && c.cfg.Store != nil {
		return decide(c.holdApproval(rn.ctx, req, rn.webhooks, announce))
	}
	announce()
	if rn.approver == "" {
		return decide(policy.Approval{Reason: "no approver for this run"}, false)
	}
	msg := wire.WithIDs(wire.Message(wire.TypeApprovalRequest, req), req.RunID, req.ThreadID)
	a := policy.Approval{Reason: "unexpected answer from the approver"}
	long := transport.Long{
		Subject: rn.approver,
		Request: func() wire.Msg { return msg },
		Reply: func(m wire.Msg) transport.Verdict {
			switch wire.Type(m.Type) {
			case wire.TypeProgress:
				return transport.Alive
			case wire.TypeApprovalDecision:
				if err := wire.DecodeAs(m.Data, wire.TypeApprovalDecision, &a); err != nil {
					a = policy.Approval{Reason: "bad answer from the approver"}
				}
			}
			return transport.Final
		},
		Idle: func() time.Duration { return c.cfg.ApprovalTimeout },
	}
	switch err := long.Ask(rn.ctx, c.tr); {
	case errors.Is(err, transport.ErrSilent):
		return decide(policy.Approval{Reason: fmt.Sprintf("no answer within %v", c.cfg.ApprovalTimeout)}, true)
	case err != nil:
		return decide(policy.Approval{Reason: "approver: " + err.Error()}, false)
	}
	return decide(a, false)
}

// holdApproval keeps an `ask` of a queued run (nobody is attached to answer
// it) in the approvals bucket for a person to decide through the HTTP API or
// the CLI, and waits for the decision, denying after ApprovalTimeout.
//
// timedOut says the denial came from the timeout, not a person. Once the
// approval is held, its approval.waiting webhook calls (to the
// coordinator's URLs and to webhooks, the run's own) are kept.
func (c *Coordinator) holdApproval(ctx context.Context, req policy.ApprovalRequest, webhooks []string, held func()) (_ policy.Approval, timedOut bool) {
	a := store.Approval{
		ID: c.cfg.NewID(), RunID: req.RunID, ThreadID: req.ThreadID, ThreadPath: req.ThreadPath,
		Tool: req.Tool, Arguments: req.Arguments, InDoubt: req.InDoubt, Coordinator: c.cfg.ID, RequestedAt: c.cfg.Now(),
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
	err := c.cfg.Store.PutApproval(ctx, a)
	held()
	if err != nil {
		return policy.Approval{Reason: "could not hold the approval: " + err.Error()}, false
	}
	if err := c.keepApprovalWebhooks(ctx, a, webhooks); err != nil {
		c.cfg.Logger.Warn("keep the approval's webhook calls", "run_id", a.RunID, "approval", a.ID, "err", err)
	}
	select {
	case d := <-decided:
		return policy.Approval{Allow: d.Decision == "allow", Reason: d.Reason}, false
	case <-time.After(c.cfg.ApprovalTimeout):
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
func (c *Coordinator) handleDecide(_ wire.Msg, d *wire.ApprovalDecide) (wire.Msg, error) {
	reason := deniedByUser
	if d.Allow {
		reason = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.cfg.Store.Decide(ctx, d.ID, d.Allow, reason); err != nil {
		return wire.Msg{}, storeError(err)
	}
	return okReply, nil
}
