package journal

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/model"
)

var _ msgpack.CustomEncoder = Entry{}

// EncodeMsgpack writes e as the map its msgpack tags describe, with only the
// fields of its kind: what the reflective encoder writes (the decoder reads
// it as any map), without checking and boxing every one of the ~30 fields of
// every entry a thread appends. Kind, Time and Turn are always written.
func (e Entry) EncodeMsgpack(enc *msgpack.Encoder) error {
	strs := [...]struct {
		key, val string
	}{
		{"system", e.System}, {"task", e.Task}, {"model", e.Model},
		{"call_id", e.CallID}, {"tool", e.Tool}, {"arguments", e.Arguments}, {"result", e.Result},
		{"tool_status", e.ToolStatus}, {"reason", e.Reason}, {"child", e.Child}, {"name", e.Name},
		{"content", e.Content}, {"target", e.Target}, {"status", string(e.Status)},
		{"output", e.Output}, {"error", e.Error}, {"worker", e.Worker},
	}
	ints := [...]struct {
		key string
		val int64
	}{{"latency_ms", e.LatencyMS}, {"duration_ms", e.DurationMS}, {"attempt", int64(e.Attempt)}}
	usages := [...]struct {
		key string
		val model.Usage
	}{{"usage", e.Usage}, {"own", e.Own}}

	n := 3
	for _, s := range strs {
		if s.val != "" {
			n++
		}
	}
	for _, i := range ints {
		if i.val != 0 {
			n++
		}
	}
	for _, u := range usages {
		if u.val != (model.Usage{}) {
			n++
		}
	}
	if e.Thread != nil {
		n++
	}
	if e.Spec != nil {
		n++
	}
	if e.Message != nil {
		n++
	}
	if e.Allow {
		n++
	}

	w := writer{enc: enc}
	w.check(enc.EncodeMapLen(n))
	w.key("k")
	w.check(enc.EncodeString(string(e.Kind)))
	w.key("at")
	w.check(enc.EncodeTime(e.Time))
	w.key("turn")
	w.check(enc.EncodeInt(int64(e.Turn)))
	for _, s := range strs {
		if s.val != "" {
			w.key(s.key)
			w.check(enc.EncodeString(s.val))
		}
	}
	for _, i := range ints {
		if i.val != 0 {
			w.key(i.key)
			w.check(enc.EncodeInt(i.val))
		}
	}
	for _, u := range usages {
		if u.val != (model.Usage{}) {
			w.key(u.key)
			w.check(enc.EncodeMapLen(2))
			w.key("input_tokens")
			w.check(enc.EncodeInt(u.val.InputTokens))
			w.key("output_tokens")
			w.check(enc.EncodeInt(u.val.OutputTokens))
		}
	}
	if e.Thread != nil {
		w.key("thread")
		w.check(enc.Encode(e.Thread))
	}
	if e.Spec != nil {
		w.key("spec")
		w.agent(e.Spec)
	}
	if e.Message != nil {
		w.key("message")
		w.message(e.Message)
	}
	if e.Allow {
		w.key("allow")
		w.check(enc.EncodeBool(true))
	}
	return w.err
}

// writer keeps the first error of a run of writes.
type writer struct {
	enc *msgpack.Encoder
	err error
}

func (w *writer) check(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *writer) key(k string) { w.check(w.enc.EncodeString(k)) }

var _ msgpack.CustomEncoder = ThreadInfo{}

// EncodeMsgpack writes t as the map its msgpack tags describe (every start
// entry carries one).
func (t ThreadInfo) EncodeMsgpack(enc *msgpack.Encoder) error {
	n := 4
	if t.ParentID != "" {
		n++
	}
	w := writer{enc: enc}
	w.check(enc.EncodeMapLen(n))
	w.key("id")
	w.check(enc.EncodeString(t.ID))
	if t.ParentID != "" {
		w.key("parent_id")
		w.check(enc.EncodeString(t.ParentID))
	}
	w.key("name")
	w.check(enc.EncodeString(t.Name))
	w.key("path")
	w.check(enc.EncodeString(t.Path))
	w.key("depth")
	w.check(enc.EncodeInt(int64(t.Depth)))
	return w.err
}
