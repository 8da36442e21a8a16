package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/wire"
)

// pollWait bounds one pull request of Next; Next pulls again after it.
// It is short because the server may deliver a message to any pull still
// open, the pulls of a coordinator that froze since it asked included: a
// run taken over from a frozen coordinator (after its lease went unrenewed
// for seconds) must not go back to that coordinator's old pulls.
const pollWait = 2 * time.Second

// Enqueue submits a run. It creates the run's queued record first, then
// publishes the submission with the run id as message id, so the stream
// drops a second copy within the DuplicateWindow.
//
// A run whose record already exists is a duplicate: Enqueue reports
// duplicate=true and publishes nothing, except when that record is still
// queued and young enough for the stream to deduplicate: then it publishes
// again (a no-op if the first publish landed), which repairs an Enqueue that
// died between the record and the publish.
func (s *Store) Enqueue(ctx context.Context, sub wire.RunSubmit) (duplicate bool, err error) {
	if err := checkID(sub.RunID); err != nil {
		return false, err
	}
	// The run's trace starts where it is submitted (ctx carries it when
	// the submitter sent one with its request; else it starts here) and
	// travels in the queued message's headers to whichever coordinator
	// runs it.
	if tracing.TraceID(ctx) == "" {
		var span trace.Span
		ctx, span = tracing.StartSubmit(ctx, sub.RunID)
		defer span.End()
	}
	data, err := wire.Encode(wire.TypeRunSubmit, sub)
	if err != nil {
		return false, fmt.Errorf("store: enqueue %s: %w", sub.RunID, err)
	}
	if limit := s.maxValue(); len(data) > limit {
		return false, fmt.Errorf("%w: submission of run %s is %d bytes, limit %d", ErrTooLarge, sub.RunID, len(data), limit)
	}
	rec := SubmittedRecord(sub, s.cfg.Now().UTC())
	rec.TraceID = tracing.TraceID(ctx)
	if _, err := s.CreateRecord(ctx, rec); err != nil {
		if !errors.Is(err, ErrExists) {
			return false, fmt.Errorf("store: enqueue %s: %w", sub.RunID, err)
		}
		cur, _, gerr := s.GetRecord(ctx, sub.RunID)
		if gerr != nil {
			return true, fmt.Errorf("store: enqueue %s: %w", sub.RunID, gerr)
		}
		if !sameSubmission(cur, sub) {
			return true, fmt.Errorf("run id %s %w", sub.RunID, ErrIDTaken)
		}
		if cur.Status != record.Queued || s.cfg.Now().Sub(cur.CreatedAt) > s.cfg.DuplicateWindow*9/10 {
			return true, nil
		}
		duplicate = true
	}
	msg := &nats.Msg{Subject: SubjectQueue, Data: data, Header: nats.Header{}}
	msg.Header.Set(wire.HeaderRun, sub.RunID)
	for k, v := range tracing.Inject(ctx, nil) {
		msg.Header[k] = []string{v} // lower-case, as sent everywhere
	}
	msg.Header.Set(wire.HeaderType, string(wire.TypeRunSubmit))
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(sub.RunID), jetstream.WithExpectStream(QueueStream))
	if err != nil {
		return duplicate, fmt.Errorf("store: enqueue %s: publish: %w", sub.RunID, err)
	}
	return duplicate || ack.Duplicate, nil
}

// Requeue submits a run whose record exists again, under a message id of
// its own (the stream would drop a second copy under the run id): a resume.
func (s *Store) Requeue(ctx context.Context, sub wire.RunSubmit, msgID string) error {
	if err := checkID(sub.RunID); err != nil {
		return err
	}
	data, err := wire.Encode(wire.TypeRunSubmit, sub)
	if err != nil {
		return fmt.Errorf("store: requeue %s: %w", sub.RunID, err)
	}
	msg := &nats.Msg{Subject: SubjectQueue, Data: data, Header: nats.Header{}}
	msg.Header.Set(wire.HeaderRun, sub.RunID)
	msg.Header.Set(wire.HeaderType, string(wire.TypeRunSubmit))
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(QueueStream)); err != nil {
		return fmt.Errorf("store: requeue %s: publish: %w", sub.RunID, err)
	}
	return nil
}

// sameSubmission reports whether rec was created from what sub asks: the
// same task, root spec and agents (compared as the JSON the record keeps).
func sameSubmission(rec record.Run, sub wire.RunSubmit) bool {
	if rec.Spec == nil && rec.Task == "" {
		return true // a record that says nothing of what was asked
	}
	if rec.Task != sub.Task {
		return false
	}
	same := func(a, b any) bool {
		ja, err1 := json.Marshal(a)
		jb, err2 := json.Marshal(b)
		return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
	}
	agents := func(m map[string]spec.Agent) map[string]spec.Agent {
		if len(m) == 0 {
			return nil
		}
		return m
	}
	return rec.Spec != nil && same(*rec.Spec, sub.Agent) && same(agents(rec.Agents), agents(sub.Agents))
}

// Next waits for one submission and returns it, until ctx ends. It pulls
// exactly one message at a time, so a coordinator holds only what it runs.
// A message that does not decode as a RunSubmit is terminated, logged and
// skipped. Transient pull errors (a reconnect, a leader change) are logged
// and retried; Next returns an error only when ctx ends, the connection is
// closed, or the consumer is gone.
func (s *Store) Next(ctx context.Context) (*Submission, error) {
	if s.queue == nil {
		return nil, ErrClient
	}
	wait := 100 * time.Millisecond
	for {
		msg, err := pull(ctx, s.queue)
		switch {
		case err == nil:
			wait = 100 * time.Millisecond
			if sub := s.submission(ctx, msg); sub != nil {
				return sub, nil
			}
			continue
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConsumerDeleted),
			errors.Is(err, jetstream.ErrConsumerNotFound):
			return nil, fmt.Errorf("store: next submission: %w", err)
		}
		s.log.Warn("store: pull submission failed, retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// pull waits for the next message of c, one pull of at most pollWait at a
// time, until a pull fails (its error) or ctx ends (its cause).
func pull(ctx context.Context, c jetstream.Consumer) (jetstream.Msg, error) {
	for {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		pctx, cancel := context.WithTimeout(ctx, pollWait)
		msg, err := c.Next(jetstream.FetchContext(pctx))
		cancel()
		switch {
		case err == nil:
			return msg, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
			continue // an empty pull: pull again
		}
		return nil, err
	}
}

// submission decodes msg, or terminates it and returns nil.
func (s *Store) submission(ctx context.Context, msg jetstream.Msg) *Submission {
	sub := &Submission{msg: msg, nc: s.nc, maxDeliver: s.cfg.MaxDeliver}
	meta, err := msg.Metadata()
	if err == nil {
		sub.delivered, sub.seq = meta.NumDelivered, meta.Sequence.Stream
		err = wire.DecodeAs(msg.Data(), wire.TypeRunSubmit, &sub.Sub)
	}
	if err == nil && checkID(sub.Sub.RunID) != nil {
		err = fmt.Errorf("bad run id %q", sub.Sub.RunID)
	}
	if err == nil {
		return sub
	}
	s.log.Warn("store: terminating undecodable submission", "seq", sub.seq, "bytes", len(msg.Data()), "err", err)
	if terr := sub.Term(ctx, "undecodable submission: "+err.Error()); terr != nil {
		s.log.Warn("store: terminate undecodable submission", "seq", sub.seq, "err", terr)
	}
	return nil
}

// Submission is one delivery of a submitted run. Settle it exactly once
// with Ack (run finished, record stored), Nak (give it back) or Term (never
// deliver again); until then report progress (InProgress, KeepInProgress)
// at least every AckWait, or it is delivered again.
type Submission struct {
	Sub wire.RunSubmit

	msg        jetstream.Msg
	nc         *nats.Conn
	delivered  uint64
	seq        uint64
	maxDeliver int

	mu      sync.Mutex
	settled bool
}

// Delivered is how often this submission has been delivered, this delivery
// included: 1 the first time, 2 after a coordinator died holding it.
func (s *Submission) Delivered() uint64 { return s.delivered }

// LastDelivery reports whether this is the last delivery MaxDeliver allows.
// The coordinator must then settle it (fail the run, Ack or Term): an
// unsettled message at its last delivery is never delivered again and stays
// in the queue.
func (s *Submission) LastDelivery() bool { return s.delivered >= uint64(s.maxDeliver) }

// InProgress tells the server the run goes on, resetting its AckWait
// timer, and waits for the server's confirmation.
func (s *Submission) InProgress(ctx context.Context) error {
	return s.reply(ctx, "in progress", []byte("+WPI"), false)
}

// Ack removes the submission from the queue, confirmed by the server.
// Call it only when the run has finished and its record is stored.
func (s *Submission) Ack(ctx context.Context) error {
	return s.reply(ctx, "ack", []byte("+ACK"), true)
}

// Nak gives the submission back for delivery again after delay (0: at
// once), confirmed by the server.
func (s *Submission) Nak(ctx context.Context, delay time.Duration) error {
	body := []byte("-NAK")
	if delay > 0 {
		body = []byte(`-NAK {"delay": ` + strconv.FormatInt(delay.Nanoseconds(), 10) + `}`)
	}
	return s.reply(ctx, "nak", body, true)
}

// Term removes the submission for good (it is never delivered again),
// confirmed by the server; reason shows in the server's advisory.
func (s *Submission) Term(ctx context.Context, reason string) error {
	body := []byte("+TERM")
	if reason != "" {
		body = []byte("+TERM " + reason)
	}
	return s.reply(ctx, "term", body, true)
}

// reply sends an ack-protocol message (what names it in errors) and waits
// for the server's answer, unless the submission is settled; settles says
// it settles it. The server answers every kind of ack that carries a reply
// subject.
func (s *Submission) reply(ctx context.Context, what string, body []byte, settles bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settled {
		return ErrSettled
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := s.nc.RequestWithContext(ctx, s.msg.Reply(), body); err != nil {
		return fmt.Errorf("store: %s run %s: %w", what, s.Sub.RunID, err)
	}
	s.settled = settles
	return nil
}

// KeepInProgress reports progress on sub every AckWait/3 until stop is
// called, ctx ends, or sub is settled. stop waits for the reporter to exit
// (so no progress report follows an Ack made after stop) and is safe to
// call twice. Failed reports are logged; the next tick tries again.
func (s *Store) KeepInProgress(ctx context.Context, sub *Submission) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	every := s.cfg.AckWait / 3
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, every)
			err := sub.InProgress(rctx)
			rcancel()
			switch {
			case errors.Is(err, ErrSettled):
				return
			case err != nil && ctx.Err() == nil:
				s.log.Warn("store: progress report failed", "run", sub.Sub.RunID, "err", err)
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	})
}

// maxValue is the largest value the store writes as one message, leaving
// headroom under the server's max payload for subject and headers.
func (s *Store) maxValue() int {
	const headroom = 16 << 10
	return max(int(s.nc.MaxPayload())-headroom, 4<<10)
}

// SubmittedRecord is the record of a run as submitted, before any
// coordinator starts it: what it asks and with which limits.
func SubmittedRecord(sub wire.RunSubmit, now time.Time) record.Run {
	a := sub.Agent
	return record.Run{RunID: sub.RunID, Status: record.Queued, Task: sub.Task, Spec: &a, Agents: sub.Agents, Model: a.Model,
		CreatedAt: now, MaxDepth: sub.Limits.MaxDepth, MaxThreads: sub.Limits.MaxThreads, Cwd: sub.Cwd,
		SubmittedBudget: sub.Budget, Timeout: sub.Timeout, Webhooks: sub.Webhooks}
}

// Header is the submission message's headers, first value of each (trace
// context among them).
func (s *Submission) Header() map[string]string {
	h := s.msg.Headers()
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}

// QueueDepth reports the run queue's consumer: submissions not yet
// delivered, and delivered ones not yet acked (runs in progress).
func (s *Store) QueueDepth(ctx context.Context) (pending, ackPending uint64, err error) {
	if s.queue == nil {
		return 0, 0, ErrClient
	}
	info, err := s.queue.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("store: queue depth: %w", err)
	}
	return info.NumPending, uint64(info.NumAckPending), nil
}

// AckSubject is where this delivery is acked: a lease names it so that
// a coordinator taking the run over can give it back to the queue.
func (s *Submission) AckSubject() string { return s.msg.Reply() }
