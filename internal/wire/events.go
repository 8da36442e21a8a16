package wire

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/pack"
)

// Events are a thread's events as its worker reports them to the run's
// coordinator, on the messages it sends about the thread anyway. They
// carry only what the worker may say: which run and thread they are about
// (run, thread, parent, depth, name) is the coordinator's to stamp, so it is
// not sent. Each event is a map from small field numbers to its set fields,
// written and read by hand: the reflective form cost an allocation per
// field, and unset fields take no room.
type Events []event.Event

var (
	_ msgpack.CustomEncoder = Events(nil)
	_ msgpack.CustomDecoder = (*Events)(nil)
)

// Field numbers of an event on the wire; a peer skips numbers it does not know.
const (
	evType = iota + 1
	evTime
	evStatus
	evReason
	evWorker
	evModel
	evInputTokens
	evOutputTokens
	evLatency
	evTool
	evCallID
	evArguments
	evOutput
	evDecision
	evEndpoint
)

// EncodeMsgpack writes es.
func (es Events) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(len(es)); err != nil {
		return err
	}
	for i := range es {
		if err := encodeEvent(enc, &es[i]); err != nil {
			return err
		}
	}
	return nil
}

func encodeEvent(enc *msgpack.Encoder, e *event.Event) error {
	strs := [...]struct {
		key int
		val string
	}{
		{evType, string(e.Type)}, {evStatus, string(e.Status)}, {evReason, e.Reason}, {evWorker, e.Worker},
		{evModel, e.Model}, {evTool, e.Tool}, {evCallID, e.CallID}, {evArguments, e.Arguments},
		{evOutput, e.Output}, {evDecision, e.Decision}, {evEndpoint, e.Endpoint},
	}
	nums := [...]struct {
		key int
		val int64
	}{
		{evInputTokens, e.Usage.InputTokens}, {evOutputTokens, e.Usage.OutputTokens}, {evLatency, int64(e.Latency)},
	}
	n := 0
	if !e.Time.IsZero() {
		n++
	}
	for i := range strs {
		if strs[i].val != "" {
			n++
		}
	}
	for i := range nums {
		if nums[i].val != 0 {
			n++
		}
	}
	w := pack.Writer{Enc: enc}
	w.Map(n)
	if !e.Time.IsZero() {
		w.Check(enc.EncodeInt(evTime))
		w.Check(enc.EncodeTime(e.Time))
	}
	for i := range strs {
		if f := &strs[i]; f.val != "" {
			w.Check(enc.EncodeInt(int64(f.key)))
			w.Check(enc.EncodeString(f.val))
		}
	}
	for i := range nums {
		if f := &nums[i]; f.val != 0 {
			w.Check(enc.EncodeInt(int64(f.key)))
			w.Check(enc.EncodeInt(f.val))
		}
	}
	return w.Err
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (es *Events) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n <= 0 {
		*es = nil
		return nil
	}
	out := make(Events, n) // Check bounded n by the message's size
	for i := range out {
		if err := decodeEvent(dec, &out[i]); err != nil {
			return fmt.Errorf("wire: event %d: %w", i, err)
		}
	}
	*es = out
	return nil
}

func decodeEvent(dec *msgpack.Decoder, e *event.Event) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	for range n {
		key, err := dec.DecodeInt()
		if err != nil {
			return err
		}
		var s string
		var v int64
		switch key {
		case evTime:
			e.Time, err = dec.DecodeTime()
		case evInputTokens, evOutputTokens, evLatency:
			v, err = dec.DecodeInt64()
		case evType, evStatus, evReason, evWorker, evModel, evTool, evCallID, evArguments, evOutput, evDecision, evEndpoint:
			s, err = decodeString(dec)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return err
		}
		switch key {
		case evType:
			e.Type = event.Type(s)
		case evStatus:
			e.Status = event.Status(s)
		case evReason:
			e.Reason = s
		case evWorker:
			e.Worker = s
		case evModel:
			e.Model = s
		case evTool:
			e.Tool = s
		case evCallID:
			e.CallID = s
		case evArguments:
			e.Arguments = s
		case evOutput:
			e.Output = s
		case evDecision:
			e.Decision = s
		case evEndpoint:
			e.Endpoint = s
		case evInputTokens:
			e.Usage.InputTokens = v
		case evOutputTokens:
			e.Usage.OutputTokens = v
		case evLatency:
			e.Latency = event.Duration(time.Duration(v))
		}
	}
	return nil
}
