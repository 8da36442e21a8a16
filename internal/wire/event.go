package wire

import "github.com/formica-run/formica/internal/event"

// HeaderContentType names the body's encoding on event messages.
const HeaderContentType = "Content-Type"

// ClusterRun stands in for the run id on the subject of events about the
// cluster rather than one run (a worker joined or lost with no run affected).
const ClusterRun = "_cluster"

// EventSubject is where e is published: its run's subject, then its type.
func EventSubject(e event.Event) string {
	run := e.RunID
	if run == "" {
		run = ClusterRun
	}
	return SubjectEvents(run) + "." + string(e.Type)
}

// EventMessage builds the message publishing e, whose JSON (event.Marshal
// or event.AppendJSON) is data, with its headers written into h (its other
// keys removed): a publisher sending one event at a time keeps one map for
// all of them, since a publish copies it. Unlike protocol messages, events
// are JSON, not msgpack, so any tool can read them; the type header still
// routes them without decoding.
func EventMessage(h map[string]string, e *event.Event, data []byte) Msg {
	clear(h)
	h[HeaderRun], h[HeaderThread], h[HeaderContentType] = e.RunID, e.ThreadID, event.ContentType
	return Msg{Type: string(TypeEvent), Data: data, Header: h}
}
