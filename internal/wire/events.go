package wire

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
)

// Events are a thread's events as its worker reports them to the run's
// coordinator, on the messages it sends about the thread anyway. They
// carry only what the worker may say: which run and thread they are about
// (run, thread, parent, depth, name) is the coordinator's to stamp, so it is
// not sent. Each event is the map of its fields by name, as the journal
// writes it; a peer skips names it does not know.
type Events []event.Event

var (
	_ msgpack.CustomEncoder = Events(nil)
	_ msgpack.CustomDecoder = (*Events)(nil)
)

// EncodeMsgpack writes es by the events' own field names, without who they
// are about.
func (es Events) EncodeMsgpack(enc *msgpack.Encoder) error {
	return enc.Encode([]event.Event(anonymous(es)))
}

// DecodeMsgpack reads events, dropping who they are about should a peer
// send it anyway.
func (es *Events) DecodeMsgpack(dec *msgpack.Decoder) error {
	var in []event.Event
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("wire: events: %w", err)
	}
	*es = anonymous(in)
	return nil
}

// anonymous is a copy of es without the fields the coordinator stamps (run,
// thread, parent, depth, name); nil when there are none.
func anonymous(es []event.Event) Events {
	if len(es) == 0 {
		return nil
	}
	out := make(Events, len(es))
	for i, e := range es {
		e.RunID, e.ThreadID, e.ParentID, e.Depth, e.Name = "", "", "", 0, ""
		out[i] = e
	}
	return out
}
