package natstransport

import (
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/actor"
)

// TypeHeader carries actor.Msg.Type, so receivers route without decoding.
const TypeHeader = "Formica-Type"

// NATS status replies (no responders) arrive with these; nats.go parses the
// status line into them.
const (
	statusHeader       = "Status"
	noRespondersStatus = "503"
)

// maxPooledKeys keeps pooled headers small: a header that saw more distinct
// keys is left to the GC.
const maxPooledKeys = 16

// headerPool holds nats.Headers between publishes. A pooled header keeps its
// keys with empty value slices: nats.go writes nothing for an empty slice,
// and the next message reuses the slice instead of allocating one.
var headerPool = sync.Pool{New: func() any { return make(nats.Header, 4) }}

// getHeader builds the NATS header for m, or nil when m has neither type nor
// headers. Reserved names are refused: nats.go reads Status and Description
// as the server's status, and Nats- belongs to the server.
func getHeader(m actor.Msg) (nats.Header, error) {
	if m.Type == "" && len(m.Header) == 0 {
		return nil, nil
	}
	h := headerPool.Get().(nats.Header)
	for k, v := range m.Header {
		if reserved(k) {
			putHeader(h)
			return nil, fmt.Errorf("natstransport: %w: header %q is reserved", actor.ErrInvalidMsg, k)
		}
		h[k] = append(h[k][:0], v)
	}
	if m.Type != "" {
		h[TypeHeader] = append(h[TypeHeader][:0], m.Type)
	}
	return h, nil
}

func putHeader(h nats.Header) {
	if h == nil || len(h) > maxPooledKeys {
		return
	}
	for k, v := range h {
		clear(v)
		h[k] = v[:0]
	}
	headerPool.Put(h)
}

func reserved(k string) bool {
	return k == statusHeader || k == "Description" || k == TypeHeader ||
		(len(k) >= 5 && strings.EqualFold(k[:5], "Nats-"))
}

// fromNats converts a received message. It allocates a header map only when
// the message carries headers besides the type; of repeated values the
// first wins. An empty body is nil, as it was sent.
func fromNats(m *nats.Msg) actor.Msg {
	var out actor.Msg
	if len(m.Data) > 0 {
		out.Data = m.Data
	}
	if len(m.Header) == 0 {
		return out
	}
	for k, vs := range m.Header {
		if len(vs) == 0 {
			continue
		}
		if k == TypeHeader {
			out.Type = vs[0]
			continue
		}
		if out.Header == nil {
			out.Header = make(map[string]string, len(m.Header))
		}
		out.Header[k] = vs[0]
	}
	return out
}

// isNoResponders mirrors nats.go's own check: an empty body with status 503.
func isNoResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get(statusHeader) == noRespondersStatus
}

// isProgress reads the type without converting the message.
func isProgress(m *nats.Msg) bool {
	return m.Header.Get(TypeHeader) == actor.TypeProgress
}
