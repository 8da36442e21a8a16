package wire

import "github.com/formica-run/formica/internal/event"

// HeaderContentType names the body's encoding on event messages.
const HeaderContentType = "Content-Type"

// ClusterRun stands in for the run id on the subject of events about the
// cluster rather than one run (a worker joined or lost with no run affected).
const ClusterRun = "_cluster"

// EventSubject is where e is published: its run's subject, then its type.
// It is built in one concatenation, as it is for every event published.
func EventSubject(e event.Event) string {
	run := e.RunID
	if run == "" {
		run = ClusterRun
	}
	return subjectEvents + run + "." + string(e.Type)
}

// eventHeader is every event message's one header, its content type:
// events are JSON, not msgpack like protocol messages, so any tool (`nats
// sub`, the events stream, jq) reads them. Shared and never changed: a
// publish only reads it.
var eventHeader = map[string]string{HeaderContentType: event.ContentType}

// EventMessage is the message publishing an event whose JSON
// (event.Marshal) is data. Its one header is the content type: what the
// event says is all in its JSON and its subject, so it carries no run,
// thread or type header, which the publisher would encode and the server
// and the events stream parse and keep with every event.
func EventMessage(data []byte) Msg {
	return Msg{Data: data, Header: eventHeader}
}
