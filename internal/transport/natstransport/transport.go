// Package natstransport implements transport.Transport over a core NATS
// connection (no JetStream).
//
// Requests share one wildcard subscription per Transport on
// "<inbox>.*": each request gets a token under it, like nats.go's own
// response mux, but a request keeps receiving until it is stopped, so a
// worker can send progress heartbeats before its result.
//
// Served messages go to handler goroutines, bounded per subscription, with a
// bounded waiting queue and an explicit "overloaded" reply past it.
package natstransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// Defaults for zero Config fields.
const (
	DefaultMaxPending   = 256
	DefaultStopTimeout  = 10 * time.Second
	DefaultFlushTimeout = 10 * time.Second
)

// Config configures a Transport. Zero values mean defaults.
type Config struct {
	// InboxPrefix is the root of this transport's reply subjects; a unique
	// token is appended ("<InboxPrefix>.<nuid>"), so several transports may
	// share one prefix and a permission on "<InboxPrefix>.>" covers them.
	// Default: the connection's inbox prefix (nats.CustomInboxPrefix, else
	// "_INBOX").
	InboxPrefix string
	// Logger receives dropped progress, refused messages and handler
	// panics. Default: discard.
	Logger *slog.Logger
	// MaxPending bounds, per Serve subscription, the messages waiting for a
	// free handler once maxConcurrent run; past it they are refused as
	// overloaded. Default DefaultMaxPending.
	MaxPending int
	// StopTimeout bounds how long Subscription.Stop waits for the
	// subscription to drain and its running handlers to return.
	// Default DefaultStopTimeout.
	StopTimeout time.Duration
	// Offloader, when set, carries bodies larger than the connection's max
	// payload by reference, transparently to both ends.
	Offloader Offloader
	// MayCarryRef says which message types may arrive by reference; a
	// reference on any other type is refused unread, so no peer can make
	// this process fetch (and drop) an object by naming it in, say, a
	// listing request. Nil allows every type.
	MayCarryRef func(msgType string) bool
	// Sender names the party whose body references may come on a message
	// served on subject, or in a reply to a request sent to subject; it is
	// passed to Offloader.GetPayload, which reads only that party's bodies.
	// "" refuses references there unread. Nil passes "" for every message.
	Sender func(subject string) string
	// Recipient names the party a message sent to subject (a request's or
	// a publish's subject, a reply's reply subject) goes to; it is passed
	// to Offloader.PutPayload, which writes the body where that party
	// reads it. Nil passes "".
	Recipient func(subject string) string
}

// Transport is an transport.Transport over one NATS connection. It does not own
// the connection: Close releases the transport's subscriptions, not nc.
type Transport struct {
	nc     *nats.Conn
	cfg    Config
	log    *slog.Logger
	prefix string // "<inbox>." ; reply subjects are prefix + token
	inbox  *nats.Subscription
	seq    atomic.Uint64 // call tokens; the prefix already makes them unique

	mu     sync.RWMutex
	calls  map[string]*call
	serves map[*serveSub]struct{}
	closed bool
}

var _ transport.Transport = (*Transport)(nil)

// New subscribes the transport's reply inbox on nc.
func New(nc *nats.Conn, cfg Config) (*Transport, error) {
	if nc == nil {
		return nil, fmt.Errorf("natstransport: %w: nil connection", transport.ErrInvalidConfig)
	}
	if cfg.MaxPending < 0 || cfg.StopTimeout < 0 {
		return nil, fmt.Errorf("natstransport: %w: negative limit", transport.ErrInvalidConfig)
	}
	if p := cfg.InboxPrefix; p != "" && (strings.ContainsAny(p, "*> \t\r\n") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..")) {
		return nil, fmt.Errorf("natstransport: %w: inbox prefix %q is not a literal subject", transport.ErrInvalidConfig, p)
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	inbox := nc.NewInbox() // honours nats.CustomInboxPrefix
	if cfg.InboxPrefix != "" {
		// nats.NewInbox is "_INBOX.<nuid>": keep the unique part.
		inbox = cfg.InboxPrefix + "." + strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix)
	}
	t := &Transport{
		nc:     nc,
		cfg:    cfg,
		log:    cfg.Logger,
		prefix: inbox + ".",
		calls:  make(map[string]*call),
		serves: make(map[*serveSub]struct{}),
	}
	// No Flush needed: the SUB precedes every request on the same
	// connection, so it is in place before any reply can come.
	sub, err := nc.Subscribe(t.prefix+"*", t.route)
	if err != nil {
		return nil, fmt.Errorf("natstransport: subscribe inbox: %w", err)
	}
	t.inbox = sub
	return t, nil
}

// Publish sends m to subject without waiting.
func (t *Transport) Publish(ctx context.Context, subject string, m wire.Msg) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.publish(subject, "", m, nil)
}

// Flush waits until the server has processed everything sent so far. With
// no deadline on ctx it gives up after DefaultFlushTimeout.
func (t *Transport) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultFlushTimeout)
		defer cancel()
	}
	if err := t.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("natstransport: flush: %w", err)
	}
	return nil
}

// Close stops every Serve subscription, ends every open Call (their Next
// returns transport.ErrClosed) and unsubscribes the inbox. The connection stays
// open. Safe to call twice.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	calls := t.calls
	t.calls = make(map[string]*call)
	serves := make([]*serveSub, 0, len(t.serves))
	for s := range t.serves {
		serves = append(serves, s)
	}
	t.mu.Unlock()

	var errs []error
	for _, s := range serves {
		errs = append(errs, s.Stop())
	}
	for _, c := range calls {
		c.shut()
	}
	if err := t.inbox.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		errs = append(errs, fmt.Errorf("natstransport: unsubscribe inbox: %w", err))
	}
	return errors.Join(errs...)
}

// publish sends m with the type header; nats.Msg and its header are only
// borrowed for the call, nats.go copies them into its write buffer.
//
// A body sent by reference is the sender's to delete: a request's when its
// call is closed (c, not nil), any other's after SentBodyLife.
func (t *Transport) publish(subject, reply string, m wire.Msg, c *call) error {
	m, ref, err := t.offload(subject, m)
	if err != nil {
		return err
	}
	if ref != "" {
		if c != nil {
			stored := ref // its own variable, so only a stored body costs an allocation
			c.ref.Store(&stored)
			if c.closed.Load() {
				c.dropBody() // closed while the body was stored
			}
		} else {
			defer t.dropSent(ref, true)
		}
	}
	h, err := header(m)
	if err != nil {
		return err
	}
	if err := t.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Header: h, Data: m.Data}); err != nil {
		return fmt.Errorf("natstransport: publish %s: %w", subject, err)
	}
	return nil
}

// newReply returns a fresh reply subject and its token (a substring of it,
// so the map key costs no allocation).
func (t *Transport) newReply() (subject, token string) {
	var buf [24]byte
	subject = t.prefix + string(strconv.AppendUint(buf[:0], t.seq.Add(1), 36))
	return subject, subject[len(t.prefix):]
}

// route runs on the connection's read loop for every reply: it must not block.
func (t *Transport) route(m *nats.Msg) {
	token, ok := strings.CutPrefix(m.Subject, t.prefix)
	if !ok || FromStream(m) {
		return
	}
	t.mu.RLock()
	c := t.calls[token]
	t.mu.RUnlock()
	if c == nil {
		return // closed call: a late reply has nowhere to go
	}
	c.dispatch(m)
}
