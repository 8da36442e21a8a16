package natstransport

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// TypeHeader carries wire.Msg.Type, so receivers route without decoding,
// unless the body names its type itself (bodyType): then the message goes
// without it, and with no other header NATS has no header to write or parse.
const TypeHeader = wire.HeaderType

// NATS status replies (no responders) arrive with these; nats.go parses the
// status line into them.
const (
	statusHeader       = "Status"
	noRespondersStatus = "503"
)

// header builds the NATS header for m, or nil when m has neither type nor
// headers. Reserved names are refused: nats.go reads Status and Description
// as the server's status, and Nats- belongs to the server.
func header(m wire.Msg) (nats.Header, error) {
	typed := m.Type != "" && bodyType(m.Data) != m.Type
	if !typed && len(m.Header) == 0 {
		return nil, nil
	}
	h := make(nats.Header, len(m.Header)+1)
	for k, v := range m.Header {
		if reserved(k) {
			return nil, fmt.Errorf("natstransport: %w: header %q is reserved", transport.ErrInvalidMsg, k)
		}
		h[k] = []string{v}
	}
	if typed {
		h[TypeHeader] = []string{m.Type}
	}
	return h, nil
}

func reserved(k string) bool {
	return k == statusHeader || k == "Description" || k == TypeHeader ||
		(len(k) >= 5 && strings.EqualFold(k[:5], "Nats-"))
}

// fromNats converts a received message. It allocates a header map only when
// the message carries headers besides the type; of repeated values the
// first wins. An empty body is nil, as it was sent. Without a type header
// the type is the one the body names.
func fromNats(m *nats.Msg) wire.Msg {
	var out wire.Msg
	if len(m.Data) > 0 {
		out.Data = m.Data
	}
	if len(m.Header[TypeHeader]) == 0 {
		out.Type = bodyType(m.Data)
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

// bodyType is the type a body names itself, or "": a msgpack map whose
// first entry is "t" with a string of under 32 bytes, which is how every
// Formica message begins (wire.Encode writes the envelope's type first).
func bodyType(data []byte) string {
	if len(data) < 4 || data[0]&0xf0 != 0x80 || data[1] != 0xa1 || data[2] != 't' || data[3]&0xe0 != 0xa0 {
		return ""
	}
	n := int(data[3] & 0x1f)
	if len(data) < 4+n {
		return ""
	}
	return string(data[4 : 4+n])
}
