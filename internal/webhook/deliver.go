package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Defaults of the zero Config fields.
const (
	// DefaultTimeout bounds one call, connection to answer.
	DefaultTimeout = 10 * time.Second
	// DefaultAttempts bounds the calls of one message.
	DefaultAttempts = 8
	// DefaultBackoff is the wait after a first failed call; each further
	// failure doubles it, up to DefaultMaxBackoff. With the defaults a
	// message is given up about 11 minutes (plus its calls' time) after
	// its first call: waits of 5s, 10s, 20s, 40s, 80s, 160s, 320s, each
	// jittered.
	DefaultBackoff    = 5 * time.Second
	DefaultMaxBackoff = 10 * time.Minute
	// DefaultWorkers is how many calls one Deliverer makes at once.
	DefaultWorkers = 4
)

// Job is one delivery of a kept message, as a queue hands it out.
type Job interface {
	// Data is the message (Message as JSON).
	Data() []byte
	// Attempt counts the deliveries of the message, this one included.
	Attempt() int
	// Done removes the message: delivered, or given up.
	Done(ctx context.Context) error
	// Retry gives the message back to be delivered again after delay.
	Retry(ctx context.Context, delay time.Duration) error
}

// Outcome is what one call of a message came to.
type Outcome struct {
	Message Message
	Attempt int
	// StatusCode is the receiver's answer; 0 when none came.
	StatusCode int
	// Err says why the call failed; nil when it delivered the message.
	Err error
	// Final: the message is settled (delivered, answered 410 Gone, or
	// out of attempts) and is not called again.
	Final bool
}

// Config configures a Deliverer.
type Config struct {
	// Secret signs every message; required.
	Secret Secret
	// Next is the queue of kept messages: it blocks until one is due, or
	// ctx ends. Required.
	Next func(ctx context.Context) (Job, error)
	// Report, when set, is told each call's outcome.
	Report func(Outcome)
	// Timeout bounds one call; default DefaultTimeout. It must be well
	// below the time the queue gives a delivery before handing the
	// message out again.
	Timeout time.Duration
	// Attempts bounds the calls of one message; default DefaultAttempts.
	Attempts int
	// Backoff and MaxBackoff are the wait after the first failed call and
	// the most any wait grows to; defaults DefaultBackoff and
	// DefaultMaxBackoff. Each wait is drawn between half and all of it.
	Backoff, MaxBackoff time.Duration
	// Workers is how many calls are made at once; default DefaultWorkers.
	Workers int
	// Transport makes the HTTP calls; nil means http.DefaultTransport.
	// Redirects are never followed: an allowed URL cannot send the call
	// elsewhere.
	Transport http.RoundTripper
	// Logger receives failures; nil discards them. The secret is never
	// logged.
	Logger *slog.Logger
	// Now is the clock of webhook-timestamp; nil means time.Now.
	Now func() time.Time
}

// Deliverer calls the URLs of kept messages until each is settled.
type Deliverer struct {
	cfg    Config
	client *http.Client
}

// New checks cfg and returns a Deliverer; Run starts it.
func New(cfg Config) (*Deliverer, error) {
	switch {
	case cfg.Secret.IsZero():
		return nil, fmt.Errorf("%w: no secret", ErrInvalidConfig)
	case cfg.Next == nil:
		return nil, fmt.Errorf("%w: no queue (Next)", ErrInvalidConfig)
	case cfg.Timeout < 0, cfg.Attempts < 0, cfg.Backoff < 0, cfg.MaxBackoff < 0, cfg.Workers < 0:
		return nil, fmt.Errorf("%w: a negative bound", ErrInvalidConfig)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Attempts = cmp.Or(cfg.Attempts, DefaultAttempts)
	cfg.Backoff = cmp.Or(cfg.Backoff, DefaultBackoff)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	cfg.Transport = cmp.Or(cfg.Transport, http.DefaultTransport)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Report == nil {
		cfg.Report = func(Outcome) {}
	}
	client := &http.Client{Transport: cfg.Transport, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Deliverer{cfg: cfg, client: client}, nil
}

// Run delivers messages with Config.Workers workers until ctx ends, and
// returns once every call under way has ended.
func (d *Deliverer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range d.cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				job, err := d.cfg.Next(ctx)
				if err != nil {
					if ctx.Err() == nil {
						d.cfg.Logger.Warn("webhook: next message", "err", err)
						select {
						case <-ctx.Done():
						case <-time.After(time.Second):
						}
					}
					continue
				}
				d.Deliver(ctx, job)
			}
		})
	}
	wg.Wait()
}

// Deliver makes one call of job's message and settles the job: done when
// the call delivered it, when the receiver answered 410 Gone, or when it
// was the last attempt; otherwise given back with the next backoff.
func (d *Deliverer) Deliver(ctx context.Context, job Job) Outcome {
	var m Message
	if err := json.Unmarshal(job.Data(), &m); err != nil || m.ID == "" || CheckURL(m.URL) != nil {
		d.cfg.Logger.Warn("webhook: dropping a message that does not decode", "err", err)
		job.Done(context.WithoutCancel(ctx))
		return Outcome{Err: fmt.Errorf("webhook: undecodable message: %v", err), Final: true}
	}
	o := Outcome{Message: m, Attempt: job.Attempt()}
	o.StatusCode, o.Err = d.call(ctx, m)
	settle := context.WithoutCancel(ctx)
	switch {
	case ctx.Err() != nil && o.Err != nil:
		// Stopping: the call was cut, not answered. The message is given
		// back at once for another coordinator, and counts as no outcome.
		job.Retry(settle, 0)
		return o
	case o.Err == nil, o.StatusCode == http.StatusGone, o.Attempt >= d.cfg.Attempts:
		o.Final = true
		if err := job.Done(settle); err != nil {
			d.cfg.Logger.Warn("webhook: settle message", "run_id", m.RunID, "webhook_id", m.ID, "err", err)
		}
	default:
		if err := job.Retry(settle, d.backoff(o.Attempt)); err != nil {
			d.cfg.Logger.Warn("webhook: give message back", "run_id", m.RunID, "webhook_id", m.ID, "err", err)
		}
	}
	if o.Err != nil {
		d.cfg.Logger.Warn("webhook call failed", "run_id", m.RunID, "webhook_id", m.ID, "url", Shown(m.URL),
			"attempt", o.Attempt, "status_code", o.StatusCode, "final", o.Final, "err", o.Err)
	}
	d.cfg.Report(o)
	return o
}

// backoff is the wait after failed attempt n (1 for the first): Backoff
// doubled n-1 times, at most MaxBackoff, drawn between half and all of it
// so that receivers that failed together are not called again together.
func (d *Deliverer) backoff(n int) time.Duration {
	b := d.cfg.Backoff
	for i := 1; i < n && b < d.cfg.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, d.cfg.MaxBackoff)
	return b/2 + rand.N(b/2+1)
}

// maxErrorBody bounds what an error answer's body adds to the error.
const maxErrorBody = 256

// call sends m once, signed now, and returns the status code and, unless
// the answer was 2xx, why it failed.
func (d *Deliverer) call(ctx context.Context, m Message) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return 0, err
	}
	now := d.cfg.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "formica-webhook")
	req.Header.Set(HeaderID, m.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, d.cfg.Secret.Sign(m.ID, now, m.Body))
	resp, err := d.client.Do(req)
	if err != nil {
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			return 0, fmt.Errorf("no answer within %s", d.cfg.Timeout)
		}
		if cause := errors.Unwrap(err); cause != nil {
			return 0, cause // the url.Error's cause: its own text repeats the URL, query and all
		}
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return resp.StatusCode, fmt.Errorf("answered %s: %s", resp.Status, bytes.TrimSpace(b))
}

// The headers of a signed call.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)
