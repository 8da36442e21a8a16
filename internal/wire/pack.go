package wire

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/pack"
)

// The messages of every spawn write themselves (see package pack): the
// reflective encoder allocated for each of their structs with an omitempty
// field, a dozen times per placement.
var (
	_ msgpack.CustomEncoder = SpawnRequest{}
	_ msgpack.CustomEncoder = SpawnResult{}
	_ msgpack.CustomEncoder = ExecRequest{}
	_ msgpack.CustomEncoder = ExecResult{}
)

// EncodeMsgpack writes r as its msgpack tags describe.
func (r SpawnRequest) EncodeMsgpack(enc *msgpack.Encoder) error { return r.encode(enc) }

// Msg is r as a message, encoded with neither a box nor a copy of r.
func (r *SpawnRequest) Msg() Msg { return packed(TypeSpawnRequest, r.encode) }

func (r *SpawnRequest) encode(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	r.pack(&w)
	return w.Err
}

func (r *SpawnRequest) pack(w *pack.Writer) {
	w.Map(6 + pack.Count(r.CallID != "", len(r.Handoffs) > 0, len(r.Events) > 0))
	w.Str("run_id", r.RunID)
	w.Str("parent_id", r.ParentID)
	w.Str("token", r.Token)
	w.OptStr("call_id", r.CallID)
	w.Str("name", r.Name)
	w.Str("task", r.Task)
	w.OptStrs("handoffs", r.Handoffs)
	w.Key("parent_spent")
	r.ParentSpent.Pack(w)
	r.Events.packOpt(w)
}

// EncodeMsgpack writes r as its msgpack tags describe.
func (r SpawnResult) EncodeMsgpack(enc *msgpack.Encoder) error { return r.encode(enc) }

// Msg is r as a message, encoded with neither a box nor a copy of r.
func (r *SpawnResult) Msg() Msg { return packed(TypeSpawnResult, r.encode) }

func (r *SpawnResult) encode(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	r.pack(&w)
	return w.Err
}

func (r *SpawnResult) pack(w *pack.Writer) {
	w.Map(1 + pack.Count(r.Refusal != "", r.Budget != "", r.ThreadID != "", r.Worker != ""))
	w.OptStr("refusal", string(r.Refusal))
	w.OptStr("budget", string(r.Budget))
	w.OptStr("thread_id", r.ThreadID)
	w.OptStr("worker", r.Worker)
	w.Key("result")
	r.Result.Pack(w)
}

// EncodeMsgpack writes r as its msgpack tags describe.
func (r ExecRequest) EncodeMsgpack(enc *msgpack.Encoder) error { return r.encode(enc) }

// Msg is r as a message, encoded with neither a box nor a copy of r.
func (r *ExecRequest) Msg() Msg { return packed(TypeExecRequest, r.encode) }

func (r *ExecRequest) encode(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	r.pack(&w)
	return w.Err
}

func (r *ExecRequest) pack(w *pack.Writer) {
	w.Map(7 + pack.Count(r.SpecHash != "", len(r.Spec) > 0, r.Proof != ""))
	w.Key("thread")
	r.Thread.Pack(w)
	w.OptStr("spec_hash", r.SpecHash)
	w.OptBytes("spec", r.Spec)
	w.Str("coordinator", r.Coordinator)
	w.Str("epoch", r.Epoch)
	w.Int("attempt", r.Attempt)
	w.Str("token", r.Token)
	w.OptStr("proof", r.Proof)
	w.Int64("uptime", int64(r.Uptime))
	w.Key("grant")
	r.Grant.Pack(w)
}

// EncodeMsgpack writes r as its msgpack tags describe.
func (r ExecResult) EncodeMsgpack(enc *msgpack.Encoder) error { return r.encode(enc) }

// Msg is r as a message, encoded with neither a box nor a copy of r.
func (r *ExecResult) Msg() Msg { return packed(TypeExecResult, r.encode) }

func (r *ExecResult) encode(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	r.pack(&w)
	return w.Err
}

func (r *ExecResult) pack(w *pack.Writer) {
	w.Map(4 + pack.Count(len(r.Events) > 0))
	w.Str("thread_id", r.ThreadID)
	w.Str("worker", r.Worker)
	w.Str("token", r.Token)
	w.Key("result")
	r.Result.Pack(w)
	r.Events.packOpt(w)
}

// packed is the message of type t whose body write writes (MustEncode).
func packed(t Type, write func(*msgpack.Encoder) error) Msg {
	data, err := encodeWith(t, write)
	if err != nil {
		panic(err)
	}
	return Msg{Type: string(t), Data: data}
}

// packOpt writes es under "events" unless there are none (omitempty).
func (es Events) packOpt(w *pack.Writer) {
	if len(es) > 0 {
		w.Key("events")
		w.Check(es.EncodeMsgpack(w.Enc))
	}
}
