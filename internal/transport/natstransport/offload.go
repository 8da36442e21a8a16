package natstransport

import (
	"context"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/wire"
	"github.com/nats-io/nats.go"
)

// Offloader keeps payloads too large for a NATS message (a JetStream
// stream in Formica) and hands them back by reference. PutPayload's to is
// the party the message goes to, as Config.Recipient names it ("" for
// none); GetPayload's from is the party the message came from, as
// Config.Sender names it: the Offloader refuses a reference that party did
// not write.
type Offloader interface {
	PutPayload(ctx context.Context, to string, data []byte) (ref string, err error)
	GetPayload(ctx context.Context, from, ref string) ([]byte, error)
}

// deleter is an Offloader that deletes bodies: those it may
// (MayDeletePayload), once read or once their exchange is over.
type deleter interface {
	MayDeletePayload(ref string) bool
	DeletePayload(ctx context.Context, ref string) error
}

// PayloadHeader carries the reference of an offloaded body.
const PayloadHeader = "Formica-Payload"

// offloadHeadroom leaves room under the max payload for headers.
const offloadHeadroom = 16 << 10

// offloadTimeout bounds one store or fetch of an offloaded body.
const offloadTimeout = 30 * time.Second

// SentBodyLife is how long a body this transport sent by reference in a
// reply or a publish (which end no exchange it could watch) is kept before
// it deletes it: its reader fetches it on receipt, within offloadTimeout. A
// request's body is deleted when its call is closed.
const SentBodyLife = 4 * offloadTimeout

// offload replaces a body too large for the connection, sent to subject, by
// a reference, when the transport has an Offloader, and returns the
// reference ("" for a body sent inline). Smaller messages pass untouched.
func (t *Transport) offload(subject string, m wire.Msg) (wire.Msg, string, error) {
	if t.Inline(len(m.Data)) {
		return m, "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), offloadTimeout)
	defer cancel()
	var to string
	if t.cfg.Recipient != nil {
		to = t.cfg.Recipient(subject)
	}
	ref, err := t.cfg.Offloader.PutPayload(ctx, to, m.Data)
	if err != nil {
		return m, "", fmt.Errorf("natstransport: offload %d bytes: %w", len(m.Data), err)
	}
	h := make(map[string]string, len(m.Header)+1)
	for k, v := range m.Header {
		h[k] = v
	}
	h[PayloadHeader] = ref
	return wire.Msg{Type: m.Type, Header: h, Data: nil}, ref, nil
}

// Inline reports whether a body of n bytes goes in the message itself, so
// that sending it is a publish, never an upload to the Offloader (which may
// take a while).
func (t *Transport) Inline(n int) bool {
	return t.cfg.Offloader == nil || n <= int(t.nc.MaxPayload())-offloadHeadroom
}

// resolve fetches an offloaded body of a message that arrived on subject
// (served) or answered a request sent to subject. It runs on the reader's
// goroutine, never on the connection's read loop.
func (t *Transport) resolve(m wire.Msg, subject string) (wire.Msg, error) {
	ref, ok := m.Header[PayloadHeader]
	if !ok {
		return m, nil
	}
	if t.cfg.Offloader == nil {
		return m, fmt.Errorf("natstransport: a body was sent by reference %q and this transport has no offloader", ref)
	}
	if t.cfg.MayCarryRef != nil && !t.cfg.MayCarryRef(m.Type) {
		return m, fmt.Errorf("natstransport: a %q message may not carry a body by reference", m.Type)
	}
	var from string
	if t.cfg.Sender != nil {
		if from = t.cfg.Sender(subject); from == "" {
			return m, fmt.Errorf("natstransport: a message about %s may not carry a body by reference", subject)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), offloadTimeout)
	defer cancel()
	data, err := t.cfg.Offloader.GetPayload(ctx, from, ref)
	if err != nil {
		return m, fmt.Errorf("natstransport: fetch offloaded body %s: %w", ref, err)
	}
	delete(m.Header, PayloadHeader)
	m.Data = data
	// Each offloaded body has exactly one reader: drop it once read, when
	// this party may (a coordinator, of what was sent to it).
	if d, ok := t.cfg.Offloader.(deleter); ok && d.MayDeletePayload(ref) {
		go t.deleteBody(d, ref)
	}
	return m, nil
}

// dropSent deletes a body this transport sent by reference, at once or
// after SentBodyLife.
func (t *Transport) dropSent(ref string, later bool) {
	d, ok := t.cfg.Offloader.(deleter)
	if ref == "" || !ok || !d.MayDeletePayload(ref) {
		return
	}
	if later {
		time.AfterFunc(SentBodyLife, func() { t.deleteBody(d, ref) })
		return
	}
	go t.deleteBody(d, ref)
}

func (t *Transport) deleteBody(d deleter, ref string) {
	ctx, cancel := context.WithTimeout(context.Background(), offloadTimeout)
	defer cancel()
	if err := d.DeletePayload(ctx, ref); err != nil {
		t.log.Debug("offloaded body not deleted", "ref", ref, "err", err)
	}
}

// receive converts a message and fetches its body when it was offloaded.
func (t *Transport) receive(m *nats.Msg, subject string) (wire.Msg, error) {
	return t.resolve(fromNats(m), subject)
}
