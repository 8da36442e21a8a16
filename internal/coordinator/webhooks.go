package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/webhook"
	"github.com/formica-run/formica/internal/wire"
)

// WebhookConfig is the calls a coordinator makes when runs end (package
// webhook). The zero value makes none and refuses submissions that name
// URLs.
type WebhookConfig struct {
	// URLs are called at the end of every run.
	URLs []string
	// Allow is the prefixes a submission may name its own URLs under.
	Allow webhook.AllowList
	// Secret signs every call. Required with URLs or Allow, and needed to
	// deliver at all: give every coordinator of a store the same one, as
	// any of them makes the calls any of them kept.
	Secret webhook.Secret
	// Events are the event types calls are made for; nil means
	// webhook.RunFinished.
	Events []string
	// Delivery tunes the calls (its Timeout, Attempts, Backoff,
	// MaxBackoff, Workers, Transport); the coordinator sets the rest.
	Delivery webhook.Config
}

// check refuses a configuration that cannot work.
func (w *WebhookConfig) check(withStore bool) error {
	if len(w.URLs) == 0 && len(w.Allow) == 0 {
		return nil
	}
	if w.Secret.IsZero() {
		return fmt.Errorf("%w: webhooks need a secret (--webhook-secret or --webhook-secret-file)", ErrBadConfig)
	}
	if !withStore {
		return fmt.Errorf("%w: webhooks need the store (a durable coordinator)", ErrBadConfig)
	}
	for _, u := range w.URLs {
		if err := webhook.CheckURL(u); err != nil {
			return fmt.Errorf("%w: --webhook: %w", ErrBadConfig, err)
		}
	}
	for _, p := range w.Allow {
		if err := webhook.CheckURL(p); err != nil {
			return fmt.Errorf("%w: --webhook-allow: %w", ErrBadConfig, err)
		}
	}
	for _, t := range w.Events {
		if err := webhook.CheckEventType(t); err != nil {
			return fmt.Errorf("%w: --webhook-events: %w", ErrBadConfig, err)
		}
	}
	return nil
}

// urls are the URLs called for an event of type t: the configured ones and
// own, or none when no calls are made for events of type t.
func (w *WebhookConfig) urls(t string, own []string) []string {
	if w.Events == nil && t != webhook.RunFinished || w.Events != nil && !slices.Contains(w.Events, t) {
		return nil
	}
	return append(slices.Clone(w.URLs), own...)
}

// checkSubmittedWebhooks refuses a submission naming a webhook URL this
// coordinator does not allow: a submitter must not have the coordinator
// call addresses of its own network.
func (c *Coordinator) checkSubmittedWebhooks(sub wire.RunSubmit) error {
	for _, u := range sub.Webhooks {
		if err := c.cfg.Webhooks.Allow.Check(u); err != nil {
			return &wire.Error{Code: wire.CodeBadRequest, Message: "webhooks: " + webhook.Reason(err)}
		}
	}
	return nil
}

// keepWebhooks keeps in the store the run.finished calls of sub's run,
// whose record is final: every configured URL and the submission's own.
// Called before the submission is acked, so a coordinator that dies in
// between loses none: the next one to get the submission keeps them again
// (the store drops copies by message id).
func (c *Coordinator) keepWebhooks(ctx context.Context, sub wire.RunSubmit) error {
	urls := c.cfg.Webhooks.urls(webhook.RunFinished, sub.Webhooks)
	if len(urls) == 0 || c.cfg.Store == nil {
		return nil
	}
	rec, _, err := c.cfg.Store.GetRecord(ctx, sub.RunID)
	if err != nil {
		return err
	}
	msgs, err := webhook.ForRun(rec, urls)
	if err != nil {
		return err
	}
	return c.putWebhooks(ctx, msgs)
}

// keepApprovalWebhooks keeps the approval.waiting calls of a, an approval
// held for a person: to the configured URLs and to webhooks, its run's.
func (c *Coordinator) keepApprovalWebhooks(ctx context.Context, a store.Approval, webhooks []string) error {
	urls := c.cfg.Webhooks.urls(webhook.ApprovalWaiting, webhooks)
	if len(urls) == 0 {
		return nil
	}
	msgs, err := webhook.ForApproval(webhook.ApprovalData{ID: a.ID, RunID: a.RunID, ThreadID: a.ThreadID,
		ThreadPath: a.ThreadPath, Tool: a.Tool, InDoubt: a.InDoubt, RequestedAt: a.RequestedAt,
		ExpiresAt: a.RequestedAt.Add(c.cfg.ApprovalTimeout)}, urls)
	if err != nil {
		return err
	}
	return c.putWebhooks(ctx, msgs)
}

// putWebhooks keeps msgs in the store, each under its id.
func (c *Coordinator) putWebhooks(ctx context.Context, msgs []webhook.Message) error {
	for _, m := range msgs {
		data, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if err := c.cfg.Store.PutWebhook(ctx, m.ID, data); err != nil {
			return err
		}
	}
	return nil
}

// ackFinished acks the submission of a run whose record is final, once
// its webhook calls are kept. Calls that cannot be kept give the
// submission back to try again; on its last delivery it is acked anyway,
// and the calls are lost (logged).
func (c *Coordinator) ackFinished(ctx context.Context, s *store.Submission) {
	if err := c.keepWebhooks(ctx, s.Sub); err != nil {
		c.cfg.Logger.Warn("keep the run's webhook calls", "run_id", s.Sub.RunID, "err", err)
		if !s.LastDelivery() {
			s.Nak(ctx, time.Second)
			return
		}
	}
	if err := s.Ack(ctx); err != nil {
		c.cfg.Logger.Warn("ack run", "run_id", s.Sub.RunID, "err", err)
	}
}

// startWebhooks makes the calls the store keeps, this coordinator's and
// others', until the coordinator stops. Without a secret it makes none.
func (c *Coordinator) startWebhooks() error {
	w := c.cfg.Webhooks
	if c.cfg.Store == nil || w.Secret.IsZero() {
		return nil
	}
	cfg := w.Delivery
	cfg.Secret, cfg.Logger, cfg.Report = w.Secret, c.cfg.Logger, c.webhookOutcome
	st := c.cfg.Store
	cfg.Next = func(ctx context.Context) (webhook.Job, error) { return st.NextWebhook(ctx) }
	d, err := webhook.New(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	c.loops.Go(func() { d.Run(c.background) })
	return nil
}

// webhookOutcome records a call's outcome in its run's events and the
// metrics. The events go out whoever holds the run, if anyone: they tell
// of a run that ended, so no lease fences them.
func (c *Coordinator) webhookOutcome(o webhook.Outcome) {
	e := event.Event{Type: event.WebhookDelivered, Time: c.cfg.Now(), RunID: o.Message.RunID,
		URL: webhook.Shown(o.Message.URL), Attempt: o.Attempt, StatusCode: o.StatusCode}
	outcome := metrics.WebhookDelivered
	if o.Err != nil {
		e.Type, e.Reason, outcome = event.WebhookFailed, o.Err.Error(), metrics.WebhookRetried
		if o.Final {
			e.Status, outcome = event.Failed, metrics.WebhookFailed
		}
	}
	c.cfg.Metrics.WebhookDelivery(outcome)
	if o.Message.RunID != "" {
		c.events.put(e)
	}
}
