package natstransport

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/actor"
)

// Offloader keeps payloads too large for a NATS message (the JetStream object
// store in Formica) and hands them back by reference.
type Offloader interface {
	PutPayload(ctx context.Context, data []byte) (ref string, err error)
	GetPayload(ctx context.Context, ref string) ([]byte, error)
}

// PayloadHeader carries the reference of an offloaded body.
const PayloadHeader = "Formica-Payload"

// offloadHeadroom leaves room under the max payload for headers.
const offloadHeadroom = 16 << 10

// offloadTimeout bounds one store or fetch of an offloaded body.
const offloadTimeout = 30 * time.Second

// offload replaces a body too large for the connection by a reference, when
// the transport has an Offloader. Smaller messages pass untouched.
func (t *Transport) offload(m actor.Msg) (actor.Msg, error) {
	if t.Inline(len(m.Data)) {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), offloadTimeout)
	defer cancel()
	ref, err := t.cfg.Offloader.PutPayload(ctx, m.Data)
	if err != nil {
		return m, fmt.Errorf("natstransport: offload %d bytes: %w", len(m.Data), err)
	}
	h := make(map[string]string, len(m.Header)+1)
	for k, v := range m.Header {
		h[k] = v
	}
	h[PayloadHeader] = ref
	return actor.Msg{Type: m.Type, Header: h, Data: nil}, nil
}

// Inline reports whether a body of n bytes goes in the message itself, so
// that sending it is a publish, never an upload to the Offloader (which may
// take a while).
func (t *Transport) Inline(n int) bool {
	return t.cfg.Offloader == nil || n <= int(t.nc.MaxPayload())-offloadHeadroom
}

// resolve fetches an offloaded body. It runs on the reader's goroutine, never
// on the connection's read loop.
func (t *Transport) resolve(m actor.Msg) (actor.Msg, error) {
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
	ctx, cancel := context.WithTimeout(context.Background(), offloadTimeout)
	defer cancel()
	data, err := t.cfg.Offloader.GetPayload(ctx, ref)
	if err != nil {
		return m, fmt.Errorf("natstransport: fetch offloaded body %s: %w", ref, err)
	}
	delete(m.Header, PayloadHeader)
	m.Data = data
	if d, ok := t.cfg.Offloader.(interface {
		DeletePayload(context.Context, string) error
	}); ok {
		// Each offloaded body has exactly one reader: drop it once read.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), offloadTimeout)
			defer cancel()
			d.DeletePayload(ctx, ref)
		}()
	}
	return m, nil
}

// receive converts a message and fetches its body when it was offloaded.
func (t *Transport) receive(m *nats.Msg) (actor.Msg, error) {
	return t.resolve(fromNats(m))
}
