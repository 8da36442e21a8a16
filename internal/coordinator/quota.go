package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/quota"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// quotas are the model endpoints' quotas this coordinator holds for the
// workers that ask it (the live coordinator with the lowest id, by the
// workers' choice): one limiter per endpoint, and the asks in progress by
// id, so an attempt's end finds its ticket and a withdrawal its waiting ask.
type quotas struct {
	reg   *quota.Registry
	mu    sync.Mutex
	asks  map[string]*quotaAsk
	owned map[string]int    // asks by worker
	names map[string]string // endpoint key -> name, of those with a limiter
	swept time.Time         // when the ends of unseen asks were last swept
}

// maxAsksPerWorker bounds the asks one worker may have open at once (each
// waiting one is a goroutine here), far above what its threads make.
const maxAsksPerWorker = 4096

// maxEndpoints bounds the endpoints whose quotas a coordinator holds, so
// asks naming ever new endpoints cannot grow its memory without end.
const maxEndpoints = 256

// limiter is the limiter of the endpoint req names, made on its first ask.
func (q *quotas) limiter(req wire.QuotaTake) (*quota.Limiter, error) {
	lim := req.Limits
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if req.Key == "" || len(req.Key) > 1024 {
		return nil, errors.New("quota ask names no endpoint, or one too long")
	}
	q.mu.Lock()
	if _, ok := q.names[req.Key]; !ok {
		if len(q.names) >= maxEndpoints {
			q.mu.Unlock()
			return nil, fmt.Errorf("quota: this coordinator already holds the quotas of %d endpoints", maxEndpoints)
		}
		q.names[req.Key] = req.Endpoint
	}
	q.mu.Unlock()
	return q.reg.Limiter(req.Key, lim), nil
}

// quotaAsk is one QuotaTake: waiting (withdraw set), granted (ticket set),
// or ended before its grant was known (over), which gives back a later grant.
type quotaAsk struct {
	owner    string
	withdraw context.CancelCauseFunc
	ticket   *quota.Ticket
	over     bool
	expires  time.Time // of an ask ended before it was seen (over)
}

// errWithdrawn ends a waiting ask whose worker gave up its attempt.
var errWithdrawn = errors.New("quota ask withdrawn by its worker")

// overKeep is how long the end of an ask not yet seen is kept for it.
const overKeep = time.Minute

func newQuotas() *quotas {
	return &quotas{reg: quota.NewRegistry(), asks: map[string]*quotaAsk{}, owned: map[string]int{}, names: map[string]string{}}
}

// handleQuotaTake queues a worker's ask for an endpoint's quota and answers
// with the grant: at once when there is room, else after QuotaWaiting and
// progress while it waits.
func (c *Coordinator) handleQuotaTake(ctx context.Context, m wire.Msg, r transport.Replier) {
	var req wire.QuotaTake
	if err := wire.DecodeAs(m.Data, wire.TypeQuotaTake, &req); err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	owner := wire.SenderOf(m.Subject)
	lim, err := c.quotas.limiter(req)
	if err != nil {
		r.Reply(wire.ErrorReply(&wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}))
		return
	}
	askCtx, withdraw := context.WithCancelCause(ctx)
	defer withdraw(nil)
	q := c.quotas
	q.mu.Lock()
	a := q.asks[req.ID]
	if a != nil { // ended (or asked twice) before this
		q.mu.Unlock()
		r.Reply(wire.ErrorReply(&wire.Error{Code: wire.CodeBadMessage, Message: "quota ask " + req.ID + " is over"}))
		return
	}
	if q.owned[owner] >= maxAsksPerWorker {
		q.mu.Unlock()
		r.Reply(wire.ErrorReply(&wire.Error{Code: wire.CodeOverloaded,
			Message: fmt.Sprintf("quota: worker %s has %d asks open", owner, maxAsksPerWorker)}))
		return
	}
	a = &quotaAsk{owner: owner, withdraw: withdraw}
	q.add(req.ID, a)
	q.mu.Unlock()

	w := &takeWaiting{c: c, r: r}
	defer w.stop()
	t, err := lim.TakeFor(model.WithQuotaNotice(askCtx, w), owner, model.Ask{Run: req.RunID, Thread: req.ThreadID,
		InputTokens: max(req.InputTokens, 0), OutputTokens: max(req.OutputTokens, 0)})
	q.mu.Lock()
	if err == nil && !a.over {
		a.ticket = t
		q.mu.Unlock()
		r.Reply(wire.Message(wire.TypeQuotaGrant, nil))
		return
	}
	q.remove(req.ID)
	q.mu.Unlock()
	if err == nil { // withdrawn as it was granted: never sent
		t.Cancel()
		return
	}
	if !errors.Is(context.Cause(askCtx), errWithdrawn) {
		r.Reply(wire.ErrorReply(err))
	}
}

// takeWaiting tells a worker its ask queued, and keeps the request alive
// while it waits.
type takeWaiting struct {
	c    *Coordinator
	r    transport.Replier
	mu   sync.Mutex
	ping *alivePing
}

func (w *takeWaiting) Waiting(_ context.Context, _, reason string) {
	w.r.Reply(wire.Message(wire.TypeQuotaWaiting, wire.QuotaWaiting{Reason: reason}))
	w.mu.Lock()
	if w.ping == nil {
		w.ping = w.c.alive.add(w.r, "")
	}
	w.mu.Unlock()
}

func (w *takeWaiting) Resumed(context.Context) error { return nil }

func (w *takeWaiting) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ping != nil {
		w.c.alive.remove(w.ping)
	}
}

// handleQuotaDone ends an ask: the attempt's answer goes to its ticket, or
// a waiting ask is withdrawn.
func (c *Coordinator) handleQuotaDone(m wire.Msg, req *wire.QuotaDone) (wire.Msg, error) {
	owner := wire.SenderOf(m.Subject)
	q := c.quotas
	now := time.Now()
	q.mu.Lock()
	q.sweepLocked(now)
	a := q.asks[req.ID]
	switch {
	case a == nil:
		if q.owned[owner] >= maxAsksPerWorker {
			q.mu.Unlock()
			return wire.Msg{}, &wire.Error{Code: wire.CodeOverloaded, Message: "quota: too many asks open"}
		}
		q.add(req.ID, &quotaAsk{owner: owner, over: true, expires: now.Add(overKeep)})
		q.mu.Unlock()
	case a.owner != owner: // not the asker's to end
		q.mu.Unlock()
		c.refuse(m.Subject, errors.New("quota ask of another worker"))
	case a.ticket != nil:
		q.remove(req.ID)
		q.mu.Unlock()
		a.ticket.Done(outcomeOf(*req, now))
	default:
		a.over = true
		q.mu.Unlock()
		a.withdraw(errWithdrawn)
	}
	return wire.Message(wire.TypeOK, nil), nil
}

// quotaWorkerLost gives back every share a lost worker held.
func (c *Coordinator) quotaWorkerLost(worker string) {
	q := c.quotas
	q.mu.Lock()
	for id, a := range q.asks {
		if a.owner != worker {
			continue
		}
		if a.withdraw != nil && a.ticket == nil {
			a.withdraw(errWithdrawn)
		}
		q.remove(id)
	}
	q.mu.Unlock()
	if n := q.reg.ReleaseOwner(worker); n > 0 {
		c.cfg.Logger.Info("quota given back by a lost worker", "worker", worker, "calls", n)
	}
}

// add and remove keep the asks and their count by worker; under mu.
func (q *quotas) add(id string, a *quotaAsk) {
	q.asks[id] = a
	q.owned[a.owner]++
}

func (q *quotas) remove(id string) {
	a, ok := q.asks[id]
	if !ok {
		return
	}
	delete(q.asks, id)
	if q.owned[a.owner]--; q.owned[a.owner] <= 0 {
		delete(q.owned, a.owner)
	}
}

// sweepLocked forgets the ends of asks that never came, at most once per
// overKeep.
func (q *quotas) sweepLocked(now time.Time) {
	if now.Sub(q.swept) < overKeep {
		return
	}
	q.swept = now
	for id, a := range q.asks {
		if a.over && a.withdraw == nil && now.After(a.expires) {
			q.remove(id)
		}
	}
}

func outcomeOf(d wire.QuotaDone, at time.Time) model.Outcome {
	o := model.Outcome{Status: d.Status, At: at,
		Usage: model.Usage{InputTokens: max(d.InputTokens, 0), OutputTokens: max(d.OutputTokens, 0)}}
	if len(d.Header) > 0 {
		o.Header = make(http.Header, len(d.Header))
		for k, v := range d.Header {
			o.Header.Set(k, v)
		}
	}
	return o
}

// handleQuota serves both messages of the quota protocol on one subject,
// so a withdrawal never overtakes its ask on the way.
func (c *Coordinator) handleQuota(ctx context.Context, m wire.Msg, r transport.Replier) {
	switch wire.Type(m.Type) {
	case wire.TypeQuotaTake:
		c.handleQuotaTake(ctx, m, r)
	case wire.TypeQuotaDone:
		answer(wire.TypeQuotaDone, c.handleQuotaDone)(ctx, m, r)
	default:
		r.Reply(wire.ErrorMsg(wire.CodeBadMessage, "unexpected message "+m.Type+" on the quota subject"))
	}
}

// quotaMetrics are the quotas this coordinator holds, for the metrics.
func (c *Coordinator) quotaMetrics() []metrics.EndpointQuota {
	snaps := c.quotas.reg.Snapshots()
	out := make([]metrics.EndpointQuota, 0, len(snaps))
	for _, s := range snaps {
		q := metrics.EndpointQuota{Endpoint: c.quotas.name(s.Name), InFlight: int64(s.InFlight), Queued: int64(s.Queued),
			Grants: s.Grants, Refusals: s.Refusals, Waits: s.Waits}
		add := func(kind, source string, v float64) {
			if v > 0 {
				q.Limits = append(q.Limits, metrics.QuotaLimit{Kind: kind, Source: source, Value: v})
			}
		}
		d, l := s.Declared, s.Learned
		add("requests_per_minute", "declared", float64(d.RequestsPerMinute))
		add("tokens_per_minute", "declared", float64(d.TokensPerMinute))
		add("input_tokens_per_minute", "declared", float64(d.InputTokensPerMinute))
		add("output_tokens_per_minute", "declared", float64(d.OutputTokensPerMinute))
		add("in_flight", "declared", float64(d.InFlight))
		add("requests_per_minute", "learned", l.RequestsPerMinute)
		add("tokens_per_minute", "learned", float64(l.TokensPerMinute))
		add("input_tokens_per_minute", "learned", float64(l.InputTokensPerMinute))
		add("output_tokens_per_minute", "learned", float64(l.OutputTokensPerMinute))
		out = append(out, q)
	}
	return out
}

// name is the endpoint whose quota key is key, the metrics' label.
func (q *quotas) name(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.names[key]
}
