package thread

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/pack"
)

var (
	_ msgpack.CustomEncoder = Thread{}
	_ msgpack.CustomEncoder = Result{}
)

// EncodeMsgpack writes t as its msgpack tags describe (see package pack):
// every placement carries one.
func (t Thread) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	t.Pack(&w)
	return w.Err
}

// Pack writes t as its msgpack tags describe.
func (t *Thread) Pack(w *pack.Writer) {
	w.Map(8 + pack.Count(t.ParentID != "", len(t.Agents) > 0, len(t.Permissions) > 0, len(t.Replay) > 0))
	w.Str("run_id", t.RunID)
	w.Str("id", t.ID)
	w.OptStr("parent_id", t.ParentID)
	w.Int("depth", t.Depth)
	w.Str("path", t.Path)
	w.Str("name", t.Name)
	w.Str("task", t.Task)
	w.Key("agent")
	t.Agent.Pack(w)
	if len(t.Agents) > 0 {
		w.Key("agents")
		w.Value(t.Agents)
	}
	w.Str("cwd", t.Cwd)
	if len(t.Permissions) > 0 {
		w.Key("permissions")
		t.Permissions.Pack(w)
	}
	if len(t.Replay) > 0 {
		w.Key("replay")
		packEntries(w, t.Replay)
	}
}

// packEntries writes a resumed thread's journal. Apart from Pack, whose
// frame would otherwise hold a copy of an entry on every placement.
//
//go:noinline
func packEntries(w *pack.Writer, es []journal.Entry) {
	w.Check(w.Enc.EncodeArrayLen(len(es)))
	for i := range es {
		w.Check(es[i].EncodeMsgpack(w.Enc))
	}
}

// EncodeMsgpack writes r as its msgpack tags describe: every helper's
// result crosses the wire twice.
func (r Result) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	r.Pack(&w)
	return w.Err
}

// Pack writes r as its msgpack tags describe.
func (r *Result) Pack(w *pack.Writer) {
	w.Map(3 + pack.Count(r.Output != "", r.Error != ""))
	w.Str("status", string(r.Status))
	w.OptStr("output", r.Output)
	w.OptStr("error", r.Error)
	w.Key("usage")
	r.Usage.Pack(w)
	w.Key("own")
	r.Own.Pack(w)
}
