// Package oneshot runs one run on a Formica cluster at once, outside the
// durable queue, on behalf of a user: it submits the run, follows its
// events, answers its approvals and returns its record. It needs nothing but
// a NATS connection (`formica run --nats`, the bench). What goes through the
// durable store (the queue, records, transcripts, held approvals) is package
// service's; the public package client is the HTTP API's.
package oneshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// Silence is how long the coordinator may send nothing on a running run
// before the client gives up on it (it sends progress every second).
const Silence = 10 * time.Second

// cancelGrace bounds the wait for a cancelled run's final record.
const cancelGrace = 30 * time.Second

// Client is a cluster client on one NATS connection.
type Client struct {
	nc *nats.Conn
	tr *natstransport.Transport
}

// New returns a client. off, when not nil, fetches and stores messages
// larger than the NATS max payload (a run's large record) by reference.
func New(nc *nats.Conn, off natstransport.Offloader) (*Client, error) {
	tr, err := natstransport.New(nc, natstransport.Config{Offloader: off, MayCarryRef: wire.MayCarryRef, Sender: store.FromCoordinators})
	if err != nil {
		return nil, err
	}
	return &Client{nc: nc, tr: tr}, nil
}

// Close releases the client's subscriptions (not the connection).
func (c *Client) Close() error { return c.tr.Close() }

// Run submits a run and blocks until it ends, sending its events to events
// and answering its approvals with approver (nil: deny). Cancelling ctx
// cancels the run on the cluster; the record then says cancelled.
func (c *Client) Run(ctx context.Context, sub wire.RunSubmit, events event.Sink, approver policy.Approver) (record.Run, error) {
	if sub.RunID == "" {
		return record.Run{}, errors.New("client: a run id is required to follow the run")
	}
	if events != nil {
		es, err := c.nc.Subscribe(wire.SubjectEvents(sub.RunID)+".>", func(m *nats.Msg) {
			if natstransport.FromStream(m) {
				return // not the coordinator's: a stream's copy someone had sent here
			}
			e, err := event.Unmarshal(m.Data)
			if err == nil {
				events.Emit(e)
			}
		})
		if err != nil {
			return record.Run{}, err
		}
		es.SetPendingLimits(1<<20, 256<<20)
		defer c.drainEvents(es)
	}
	if approver != nil {
		// In this connection's own inbox: only it may subscribe there.
		sub.Approver = c.nc.NewInbox()
		as, err := c.tr.Serve(sub.Approver, "", 0, approvalHandler(approver))
		if err != nil {
			return record.Run{}, err
		}
		defer as.Stop()
	}
	if err := c.tr.Flush(ctx); err != nil {
		return record.Run{}, err
	}
	// The submission outlives ctx: cancelling ctx cancels the run, and the
	// final record still arrives on this call.
	// The run's trace starts here and spans the whole run.
	ctx, span := tracing.StartSubmit(ctx, sub.RunID)
	defer span.End()
	msg := wire.WithIDs(wire.Message(wire.TypeRunSubmit, sub), sub.RunID, "")
	msg.Header = tracing.Inject(ctx, msg.Header)
	call, err := transport.Request(context.WithoutCancel(ctx), c.tr, wire.SubjectSubmit, msg)
	if err != nil {
		return record.Run{}, err
	}
	defer call.Close()
	waitCtx := ctx
	for {
		m, err := call.Next(waitCtx, Silence)
		if err != nil {
			if waitCtx == ctx && ctx.Err() != nil {
				c.Cancel(context.Background(), sub.RunID, context.Cause(ctx))
				var stop context.CancelFunc
				waitCtx, stop = context.WithTimeout(context.Background(), cancelGrace)
				defer stop()
				continue
			}
			switch {
			case errors.Is(err, transport.ErrNoResponders):
				return record.Run{}, fmt.Errorf("no coordinator is listening: %w", err)
			case errors.Is(err, transport.ErrSilent):
				return record.Run{}, fmt.Errorf("the coordinator went silent: %w", err)
			}
			return record.Run{}, err
		}
		switch wire.Type(m.Type) {
		case wire.TypeRunAccepted, wire.TypeProgress:
		case wire.TypeRunResult:
			var res wire.RunResult
			if err := wire.DecodeAs(m.Data, wire.TypeRunResult, &res); err != nil {
				return record.Run{}, err
			}
			return res.Record, nil
		default:
			if err := wire.MsgError(m); err != nil {
				return record.Run{}, fmt.Errorf("coordinator: %w", err)
			}
		}
	}
}

// drainEvents delivers every event already sent before unsubscribing: a
// flush makes sure they are here, and draining hands them to the sink.
func (c *Client) drainEvents(s *nats.Subscription) {
	c.nc.FlushTimeout(2 * time.Second)
	closed := s.StatusChanged(nats.SubscriptionClosed) // before Drain, so the close is not missed
	if s.Drain() != nil {
		s.Unsubscribe()
		return
	}
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
	}
}

// Cancel asks the run's coordinator to cancel the whole run.
func (c *Client) Cancel(ctx context.Context, runID string, cause error) error {
	reason := "cancelled by the client"
	if cause != nil && !errors.Is(cause, context.Canceled) {
		reason = cause.Error()
	}
	m := wire.Message(wire.TypeCancel, wire.Cancel{RunID: runID, Reason: reason})
	return c.tr.Publish(ctx, wire.SubjectRunCancel, m)
}

func approvalHandler(a policy.Approver) transport.Handler {
	return func(ctx context.Context, m wire.Msg, r transport.Replier) {
		var req policy.ApprovalRequest
		if err := wire.DecodeAs(m.Data, wire.TypeApprovalRequest, &req); err != nil {
			r.Reply(wire.ErrorMsg(wire.CodeBadMessage, err.Error()))
			return
		}
		// Keep the coordinator's wait alive while a person thinks.
		stop := make(chan struct{})
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					r.Reply(wire.Message(wire.TypeProgress, wire.Progress{}))
				}
			}
		}()
		d, err := a.Approve(ctx, req)
		close(stop)
		if err != nil {
			d = policy.Approval{Reason: err.Error()}
		}
		r.Reply(wire.Message(wire.TypeApprovalDecision, d))
	}
}
