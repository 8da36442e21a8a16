package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/quota"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// A worker's model calls take their share of each endpoint's quota from one
// coordinator, so that every worker of the cluster spends one quota: the
// live coordinator with the lowest id, which every worker tells alike from
// the heartbeats they all hear. When it is lost, the asks go to the next.

// quotaGates are this worker's providers.Gates.
type quotaGates struct{ w *Worker }

func (g quotaGates) Gate(ep providers.Endpoint) model.Gate { return remoteGate{w: g.w, ep: ep} }

// remoteGate takes an endpoint's quota from the holding coordinator.
type remoteGate struct {
	w  *Worker
	ep providers.Endpoint
}

// quotaRetry is the pause before asking again when no coordinator holds
// the quotas (none heard yet, or the holder just went silent).
const quotaRetry = 250 * time.Millisecond

func (g remoteGate) Take(ctx context.Context, ask model.Ask) (model.Ticket, error) {
	var told bool // the caller heard it waits
	for {
		coord := g.w.quotaHolder()
		if coord != "" {
			t, err := g.take(ctx, coord, ask, &told)
			if err == nil {
				return t, nil
			}
			if ctx.Err() != nil || !(errors.Is(err, transport.ErrSilent) || errors.Is(err, transport.ErrNoResponders)) {
				if n := model.QuotaNoticeFrom(ctx); n != nil && told && ctx.Err() == nil {
					_ = n.Resumed(ctx) // the call fails, and its thread goes on with its slot
				}
				return nil, err
			}
			g.w.cfg.Logger.Warn("quota holder lost; asking the next", "coordinator", coord, "endpoint", g.ep.Name, "err", err)
		}
		if !told {
			told = true
			if n := model.QuotaNoticeFrom(ctx); n != nil {
				n.Waiting(ctx, g.ep.Name, "no coordinator holds the quota")
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s's quota: %w", g.ep.Name, context.Cause(ctx))
		case <-time.After(quotaRetry):
		}
	}
}

// take asks coord for one share and waits for it; told is set once the
// caller has been told that it waits (and so must hear that it resumes).
func (g remoteGate) take(ctx context.Context, coord string, ask model.Ask, told *bool) (model.Ticket, error) {
	w := g.w
	req := wire.QuotaTake{ID: uuid.NewString(), Endpoint: g.ep.Name, Key: g.ep.Key(), Limits: g.ep.Limits,
		RunID: ask.Run, ThreadID: ask.Thread, InputTokens: ask.InputTokens, OutputTokens: ask.OutputTokens}
	subject := wire.SubjectQuota(coord, w.cfg.ID)
	call, err := transport.Request(ctx, w.tr, subject, wire.Message(wire.TypeQuotaTake, req))
	if err != nil {
		return nil, fmt.Errorf("quota: coordinator %s unreachable: %w", coord, err)
	}
	defer call.Close()
	t := &remoteTicket{w: w, subject: subject, id: req.ID, key: req.Key}
	for {
		m, err := call.Next(ctx, w.silence(coord))
		if err != nil {
			t.withdraw() // a grant on its way is given back
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for %s's quota: %w", g.ep.Name, context.Cause(ctx))
			}
			return nil, peerError("quota: coordinator "+coord, err)
		}
		if err := wire.MsgError(m); err != nil {
			return nil, fmt.Errorf("quota: %w", err)
		}
		switch wire.Type(m.Type) {
		case wire.TypeProgress:
		case wire.TypeQuotaWaiting:
			var wt wire.QuotaWaiting
			_ = wire.DecodeAs(m.Data, wire.TypeQuotaWaiting, &wt)
			if n := model.QuotaNoticeFrom(ctx); n != nil && !*told {
				*told = true
				n.Waiting(ctx, g.ep.Name, wt.Reason)
			}
		case wire.TypeQuotaGrant:
			if n := model.QuotaNoticeFrom(ctx); n != nil && *told {
				if err := n.Resumed(ctx); err != nil {
					t.withdraw()
					return nil, err
				}
			}
			return t, nil
		default:
			t.withdraw()
			return nil, fmt.Errorf("quota: unexpected answer %s from coordinator %s", m.Type, coord)
		}
	}
}

// quotaHolder is the live coordinator with the lowest id, or "" when none
// is heard.
func (w *Worker) quotaHolder() string {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	holder := ""
	for id, c := range w.coords {
		if c.fresh(now) && (holder == "" || id < holder) {
			holder = id
		}
	}
	return holder
}

// remoteTicket is a share granted by a coordinator; its end goes back
// without holding up the model call.
type remoteTicket struct {
	w       *Worker
	subject string
	id, key string
}

func (t *remoteTicket) Done(o model.Outcome) {
	d := wire.QuotaDone{ID: t.id, Key: t.key, Status: o.Status, Header: rateHeaders(o.Header),
		InputTokens: o.Usage.InputTokens, OutputTokens: o.Usage.OutputTokens}
	go t.send(d)
}

// withdraw ends an ask whose grant will not be used.
func (t *remoteTicket) withdraw() { go t.send(wire.QuotaDone{ID: t.id, Key: t.key}) }

// quotaDoneTries bounds how often an ask's end is sent before it is left to
// the holder, which gives back a lost worker's shares.
const quotaDoneTries = 3

func (t *remoteTicket) send(d wire.QuotaDone) {
	m := wire.Message(wire.TypeQuotaDone, d)
	var err error
	for range quotaDoneTries {
		if err = t.ask(m); err == nil {
			return
		}
	}
	t.w.cfg.Logger.Warn("quota: the end of a model call was not delivered", "subject", t.subject, "err", err)
}

func (t *remoteTicket) ask(m wire.Msg) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	call, err := transport.Request(ctx, t.w.tr, t.subject, m)
	if err != nil {
		return err
	}
	defer call.Close()
	reply, err := call.Next(ctx, 0)
	if err != nil {
		return err
	}
	return wire.MsgError(reply)
}

// rateHeaders keeps the headers that speak of the provider's quota.
func rateHeaders(h http.Header) map[string]string {
	var out map[string]string
	for k, v := range h {
		if len(v) == 0 || !quota.IsSignal(k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.ToLower(k)] = v[0]
	}
	return out
}

// slotLender lends a thread's slot out while its model call waits for
// quota, so a waiting call holds none, and takes it back when the call
// got its share.
type slotLender struct {
	w      *Worker
	thread string
}

func (l slotLender) Waiting(context.Context, string, string) {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.threads[l.thread]; ok {
		w.freeSlotLocked(h)
	}
}

func (l slotLender) Resumed(ctx context.Context) error {
	if h := l.w.hostedThread(l.thread); h != nil {
		return l.w.retakeSlot(ctx, h)
	}
	return nil
}
