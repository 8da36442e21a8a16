package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
)

// Events are a thread's events as its worker reports them to the run's
// coordinator, on the messages it sends about the thread anyway. They
// carry only what the worker may say: which run and thread they are about
// (run, thread, parent, depth, name) is the coordinator's to stamp, so it is
// not sent. Each event is a map from small field numbers to its set fields:
// unset fields take no room, and a peer skips numbers it does not know.
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
	evCacheReadTokens
	evCacheWriteTokens
	evUnpriced
	evCostUSD // a float64
	evPriced
	evInDoubt // a bool, sent only when true
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
		{evCacheReadTokens, e.Usage.CacheReadTokens}, {evCacheWriteTokens, e.Usage.CacheWriteTokens}, {evUnpriced, e.Usage.Unpriced},
		{evPriced, e.Usage.Priced},
	}
	n := 0
	if !e.Time.IsZero() {
		n++
	}
	if e.Usage.CostUSD != 0 {
		n++
	}
	if e.InDoubt {
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
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	if !e.Time.IsZero() {
		if err := errors.Join(enc.EncodeInt(evTime), enc.EncodeTime(e.Time)); err != nil {
			return err
		}
	}
	for i := range strs {
		if f := &strs[i]; f.val != "" {
			if err := errors.Join(enc.EncodeInt(int64(f.key)), enc.EncodeString(f.val)); err != nil {
				return err
			}
		}
	}
	for i := range nums {
		if f := &nums[i]; f.val != 0 {
			if err := errors.Join(enc.EncodeInt(int64(f.key)), enc.EncodeInt(f.val)); err != nil {
				return err
			}
		}
	}
	if e.Usage.CostUSD != 0 {
		if err := errors.Join(enc.EncodeInt(evCostUSD), enc.EncodeFloat64(e.Usage.CostUSD)); err != nil {
			return err
		}
	}
	if e.InDoubt {
		if err := errors.Join(enc.EncodeInt(evInDoubt), enc.EncodeBool(true)); err != nil {
			return err
		}
	}
	return nil
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
		case evInDoubt:
			e.InDoubt, err = dec.DecodeBool()
		case evTime:
			e.Time, err = dec.DecodeTime()
		case evCostUSD:
			e.Usage.CostUSD, err = dec.DecodeFloat64()
		case evInputTokens, evOutputTokens, evLatency, evCacheReadTokens, evCacheWriteTokens, evUnpriced, evPriced:
			v, err = dec.DecodeInt64()
		case evType, evStatus, evReason, evWorker, evModel, evTool, evCallID, evArguments, evOutput, evDecision, evEndpoint:
			s, err = dec.DecodeString()
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
		case evCacheReadTokens:
			e.Usage.CacheReadTokens = v
		case evCacheWriteTokens:
			e.Usage.CacheWriteTokens = v
		case evUnpriced:
			e.Usage.Unpriced = v
		case evPriced:
			e.Usage.Priced = v
		case evLatency:
			e.Latency = event.Duration(time.Duration(v))
		}
	}
	return nil
}
