package natstransport

import "github.com/nats-io/nats.go"

// FromStream says whether m is a copy of a stream's message rather than
// something a peer published. The server answers a direct get (and
// delivers a consumer's messages) on whatever subject the asker names,
// checking no permission there, and every such copy carries the
// Nats-Stream header; a peer's own messages never do. So anyone who may
// both write a stream (a client's cancel request) and read it could have
// the server deliver bytes of their choosing, headers included, as a
// worker's heartbeat, an exec request or a reply. Every subscription that
// takes peers' messages (served subjects, reply inboxes, heartbeats,
// events) drops such copies unread.
func FromStream(m *nats.Msg) bool {
	return m.Header != nil && m.Header.Get(nats.JSStream) != ""
}
