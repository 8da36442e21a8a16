package journal

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/pack"
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

	w := pack.Writer{Enc: enc}
	w.Map(n)
	w.Str("k", string(e.Kind))
	w.Key("at")
	w.Check(enc.EncodeTime(e.Time))
	w.Key("turn")
	w.Check(enc.EncodeInt(int64(e.Turn)))
	for _, s := range strs {
		w.OptStr(s.key, s.val)
	}
	for _, i := range ints {
		if i.val != 0 {
			w.Key(i.key)
			w.Check(enc.EncodeInt(i.val))
		}
	}
	for _, u := range usages {
		if u.val != (model.Usage{}) {
			w.Key(u.key)
			w.Map(2)
			w.Key("input_tokens")
			w.Check(enc.EncodeInt(u.val.InputTokens))
			w.Key("output_tokens")
			w.Check(enc.EncodeInt(u.val.OutputTokens))
		}
	}
	if e.Thread != nil {
		w.Key("thread")
		e.Thread.pack(&w)
	}
	if e.Spec != nil {
		w.Key("spec")
		e.Spec.Pack(&w)
	}
	if e.Message != nil {
		w.Key("message")
		e.Message.Pack(&w)
	}
	w.OptBool("allow", e.Allow)
	return w.Err
}

var _ msgpack.CustomEncoder = ThreadInfo{}

// EncodeMsgpack writes t as the map its msgpack tags describe (every start
// entry carries one).
func (t ThreadInfo) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	t.pack(&w)
	return w.Err
}

func (t *ThreadInfo) pack(w *pack.Writer) {
	w.Map(4 + pack.Count(t.ParentID != ""))
	w.Str("id", t.ID)
	w.OptStr("parent_id", t.ParentID)
	w.Str("name", t.Name)
	w.Str("path", t.Path)
	w.Int("depth", t.Depth)
}
