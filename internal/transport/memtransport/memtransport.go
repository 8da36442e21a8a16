// Package memtransport is an in-memory transport.Transport for unit tests
// of the coordinator and worker protocols: no server, no sockets, and it
// runs inside a testing/synctest bubble (make the subscriptions and calls
// there), so idle windows and timeouts pass on the fake clock. A Network is
// the hub its transports talk through; SetDrop loses chosen messages to
// simulate a lost peer or a partition.
//
// It keeps natstransport's semantics (the transporttest suite holds both to
// them), except that a message is delivered before Publish, RequestFunc or
// Reply returns, so Flush has nothing to wait for; a closed Transport sends
// nothing more, like a process gone; and there is no body by reference, no
// reserved header check and no type read from the body.
package memtransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// Defaults for zero Config fields, natstransport's.
const (
	DefaultMaxPending  = 256
	DefaultStopTimeout = 10 * time.Second
)

// Config configures a Transport. Zero (or negative) values mean defaults.
type Config struct {
	// MaxPending bounds, per Serve subscription, the messages waiting for a
	// free handler; past it they are refused as overloaded.
	MaxPending int
	// StopTimeout bounds how long Subscription.Stop waits for running
	// handlers.
	StopTimeout time.Duration
	// Logger receives refused messages and handler panics. Default: discard.
	Logger *slog.Logger
}

// Network is the hub transports attach to; it routes by subject, with NATS
// wildcards ("*" one token, ">" the rest) in subscriptions. It starts no
// goroutine of its own.
type Network struct {
	mu   sync.Mutex
	subs []*sub // call inboxes included
	drop func(subject string, m wire.Msg) bool
	seq  uint64 // inboxes
	turn uint64 // picks a queue group's member
}

// sub is one registration: a Serve subscription or a call's inbox.
type sub struct {
	subject, queue string
	to             receiver
}

type receiver interface {
	receive(subject, reply string, m wire.Msg)
}

// NewNetwork returns an empty hub.
func NewNetwork() *Network {
	return &Network{}
}

// SetDrop makes every message sent afterwards (request, reply or publish)
// for which f returns true silently lost: a dropped request reads as a
// silent peer, not as no responders. f must not modify m; nil drops
// nothing.
func (n *Network) SetDrop(f func(subject string, m wire.Msg) bool) {
	n.mu.Lock()
	n.drop = f
	n.mu.Unlock()
}

// Transport returns a new transport attached to n.
func (n *Network) Transport(cfg Config) *Transport {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Transport{net: n, cfg: cfg, calls: make(map[*call]struct{}), serves: make(map[*serveSub]struct{})}
}

func (n *Network) add(s *sub) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subs = append(n.subs, s)
}

func (n *Network) remove(s *sub) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subs = slices.DeleteFunc(n.subs, func(x *sub) bool { return x == s })
}

func (n *Network) inbox() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seq++
	return "_INBOX." + strconv.FormatUint(n.seq, 10)
}

// route hands a copy of m to every plain subscriber of subject and to one
// member of each queue group, before it returns. It reports whether
// anybody listens (a dropped message counts as heard: it is lost, not
// refused).
func (n *Network) route(subject, reply string, m wire.Msg) bool {
	n.mu.Lock()
	var to []receiver
	groups := map[string][]receiver{}
	for _, s := range n.subs {
		switch {
		case !match(s.subject, subject):
		case s.queue == "":
			to = append(to, s.to)
		default:
			groups[s.queue] = append(groups[s.queue], s.to)
		}
	}
	for _, g := range groups {
		n.turn++
		to = append(to, g[n.turn%uint64(len(g))])
	}
	drop := n.drop
	n.mu.Unlock()
	if drop != nil && drop(subject, m) {
		return true
	}
	for _, r := range to {
		r.receive(subject, reply, clone(m))
	}
	return len(to) > 0
}

// clone copies what a receiver could otherwise see the sender change, and
// leaves out what is empty, as a message off the wire would.
func clone(m wire.Msg) wire.Msg {
	out := wire.Msg{Type: m.Type}
	if len(m.Data) > 0 {
		out.Data = bytes.Clone(m.Data)
	}
	if len(m.Header) > 0 {
		out.Header = maps.Clone(m.Header)
	}
	return out
}

// match reports whether subject falls under pattern: "*" matches one
// token, a final ">" one or more.
func match(pattern, subject string) bool {
	for {
		p, prest, pmore := strings.Cut(pattern, ".")
		if p == ">" {
			return subject != ""
		}
		s, srest, smore := strings.Cut(subject, ".")
		if p != "*" && p != s {
			return false
		}
		if !pmore || !smore {
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}

// Transport is one party on a Network, like a process with its own
// connection.
type Transport struct {
	net *Network
	cfg Config

	mu     sync.Mutex
	calls  map[*call]struct{}
	serves map[*serveSub]struct{}
	closed bool // no new calls or subscriptions
	down   bool // Close is done: nothing more is sent
}

var _ transport.Transport = (*Transport)(nil)

// Publish sends m to subject; it has been delivered when Publish returns.
func (t *Transport) Publish(ctx context.Context, subject string, m wire.Msg) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := t.send(subject, "", m)
	return err
}

// Flush returns ctx's error, if any: delivery is done before a send returns.
func (t *Transport) Flush(ctx context.Context) error {
	return ctx.Err()
}

// Close stops every Serve subscription (their handlers may still reply
// while it waits for them), ends every open call with transport.ErrClosed,
// and from then on refuses to send: a closed transport is a process gone.
// Safe to call twice.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	calls := slices.Collect(maps.Keys(t.calls))
	serves := slices.Collect(maps.Keys(t.serves))
	t.mu.Unlock()

	var errs []error
	for _, s := range serves {
		errs = append(errs, s.Stop())
	}
	for _, c := range calls {
		c.finish(fmt.Errorf("memtransport: call %s: transport %w", c.subject, transport.ErrClosed))
	}
	t.mu.Lock()
	t.down = true
	t.mu.Unlock()
	return errors.Join(errs...)
}

// send routes m unless the transport is down; heard: somebody listens.
func (t *Transport) send(subject, reply string, m wire.Msg) (heard bool, err error) {
	if subject == "" {
		return false, fmt.Errorf("memtransport: %w: empty subject", transport.ErrInvalidMsg)
	}
	t.mu.Lock()
	down := t.down
	t.mu.Unlock()
	if down {
		return false, fmt.Errorf("memtransport: send %s: transport %w", subject, transport.ErrClosed)
	}
	return t.net.route(subject, reply, m), nil
}
