package store

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The webhooks stream keeps the webhook calls still to make, one message
// each, until a coordinator delivers or gives them up: a work queue that
// every coordinator pulls from through one durable consumer, so a call
// kept by a coordinator that died is made by another. A coordinator puts a
// run's calls (PutWebhook) before it acks the run's submission, so a run
// whose final record is stored has its calls kept, even if its coordinator
// dies in between: the submission comes back, and the next coordinator
// sees the record final and puts them again (the stream drops the second
// copy by message id).
//
// A failed call goes back to the queue with a delay (WebhookJob.Retry):
// the retries live in the stream, not in a coordinator's memory.
const (
	// WebhooksStream holds the calls to make (WorkQueuePolicy).
	WebhooksStream = "FORMICA_WEBHOOKS"
	// SubjectWebhooks is the one subject of WebhooksStream.
	SubjectWebhooks = "formica.webhooks"
	// WebhooksConsumer is the durable pull consumer all coordinators share.
	WebhooksConsumer = "webhooks"
	// webhooksAckWait is how long one delivery may take before the message
	// is handed out again: well above a call's timeout.
	webhooksAckWait = time.Minute
	// webhooksMaxAge drops a call nobody made for a day (no coordinator
	// ran), however many attempts it had left.
	webhooksMaxAge = 24 * time.Hour
	// webhookMaxMsgSize bounds one call: its URL, ids and body (an output
	// of webhook.MaxOutput bytes may take six times as many in JSON).
	webhookMaxMsgSize = 512 << 10
)

func webhooksStreamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        WebhooksStream,
		Description: "Formica webhook calls still to make",
		Subjects:    []string{SubjectWebhooks},
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  min(cfg.DuplicateWindow, webhooksMaxAge),
		MaxAge:      webhooksMaxAge,
		MaxMsgSize:  webhookMaxMsgSize,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}

// openWebhooksConsumer creates or updates the coordinators' consumer of
// the webhooks stream. It redelivers without bound: the deliverer counts
// attempts and gives a message up itself.
func (s *Store) openWebhooksConsumer(ctx context.Context) (err error) {
	s.webhooks, err = s.openConsumer(ctx, WebhooksStream, jetstream.ConsumerConfig{
		Durable:       WebhooksConsumer,
		Description:   "Formica coordinators delivering webhooks",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       webhooksAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1024,
	})
	return err
}

// PutWebhook keeps data, one webhook call, under id (the stream keeps one
// message per id within its duplicate window), and returns once it is
// stored.
func (s *Store) PutWebhook(ctx context.Context, id string, data []byte) error {
	if s.webhooks == nil {
		return ErrClient
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: SubjectWebhooks, Data: data},
		jetstream.WithMsgID(id), jetstream.WithExpectStream(WebhooksStream)); err != nil {
		return fmt.Errorf("store: keep webhook %s: %w", id, err)
	}
	return nil
}

// NextWebhook waits for the next webhook call due, until ctx ends.
func (s *Store) NextWebhook(ctx context.Context) (*WebhookJob, error) {
	if s.webhooks == nil {
		return nil, ErrClient
	}
	for {
		msg, err := pull(ctx, s.webhooks)
		switch {
		case ctx.Err() != nil && err != nil:
			return nil, context.Cause(ctx)
		case err != nil:
			return nil, fmt.Errorf("store: next webhook: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			s.log.Warn("store: webhook message without metadata", "err", err)
			msg.Term()
			continue
		}
		return &WebhookJob{msg: msg, attempt: int(meta.NumDelivered)}, nil
	}
}

// WebhookJob is one delivery of a kept webhook call; settle it once with
// Done or Retry, or it is handed out again after a minute.
type WebhookJob struct {
	msg     jetstream.Msg
	attempt int
}

// Data is the call as PutWebhook kept it.
func (j *WebhookJob) Data() []byte { return j.msg.Data() }

// Attempt counts the deliveries of the call, this one included.
func (j *WebhookJob) Attempt() int { return j.attempt }

// Done removes the call, confirmed by the server.
func (j *WebhookJob) Done(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return j.msg.DoubleAck(ctx)
}

// Retry hands the call out again after delay.
func (j *WebhookJob) Retry(_ context.Context, delay time.Duration) error {
	return j.msg.NakWithDelay(delay)
}
