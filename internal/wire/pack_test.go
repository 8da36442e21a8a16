package wire

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/pack"
	"github.com/formica-run/formica/internal/pack/packtest"
	"github.com/formica-run/formica/internal/thread"
)

type (
	plainSpawnRequest SpawnRequest
	plainSpawnResult  SpawnResult
	plainExecRequest  ExecRequest
	plainExecResult   ExecResult
)

// matchesTags checks T's EncodeMsgpack against the reflective encoding of
// plain, its fields without its methods, for every leaf field of T.
func matchesTags[T msgpack.CustomEncoder](t *testing.T, plain func(*T) any, extra ...T) {
	t.Helper()
	each, full := packtest.Leaves[T](t)
	packtest.MatchesReflective(t, append(append([]T{*new(T), full}, extra...), each...),
		func(v *T, w *pack.Writer) { w.Check((*v).EncodeMsgpack(w.Enc)) }, plain)
}

// TestPackMatchesTheTags: the messages of a spawn write themselves byte for
// byte as the reflective encoder writes them.
func TestPackMatchesTheTags(t *testing.T) {
	matchesTags(t, func(v *SpawnRequest) any { return (*plainSpawnRequest)(v) })
	matchesTags(t, func(v *SpawnResult) any { return (*plainSpawnResult)(v) })
	matchesTags(t, func(v *ExecRequest) any { return (*plainExecRequest)(v) }, sampleExec(), sampleExecByHash(true))
	matchesTags(t, func(v *ExecResult) any { return (*plainExecResult)(v) })
}

// TestEncodeByHashAllocatesNothing: an ExecRequest by spec hash is written
// into a buffer with no allocation.
func TestEncodeByHashAllocatesNothing(t *testing.T) {
	in := sampleExecByHash(false)
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if n := testing.AllocsPerRun(100, func() {
		buf.Reset()
		if err := in.EncodeMsgpack(enc); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// A body's Msg is what Message writes, with one allocation: the message.
func TestMsgIsMessageUnboxed(t *testing.T) {
	in := sampleExecByHash(false)
	if got, want := in.Msg(), Message(TypeExecRequest, in); !bytes.Equal(got.Data, want.Data) || got.Type != want.Type {
		t.Fatalf("Packed %+v, Message %+v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { in.Msg() }); n != 1 && !raceEnabled {
		t.Fatalf("%v allocations, want 1", n)
	}
}

// FuzzPackMatchesReflective: whatever decodes as a spawn message encodes
// again, by hand, to the bytes the reflective encoder writes for it.
func FuzzPackMatchesReflective(f *testing.F) {
	f.Add(MustEncode(TypeExecRequest, sampleExec()))
	f.Add(MustEncode(TypeExecRequest, sampleExecByHash(true)))
	f.Add(MustEncode(TypeSpawnRequest, SpawnRequest{RunID: "r", Name: "n", Task: "t", Handoffs: []string{}}))
	f.Add(MustEncode(TypeSpawnResult, SpawnResult{ThreadID: "t", Result: thread.Result{Status: event.Succeeded, Output: "o"}}))
	f.Add(MustEncode(TypeExecResult, ExecResult{ThreadID: "t", Events: Events{{Type: event.ModelCall, Model: "sim"}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPacked(t, data, TypeSpawnRequest, func(v *SpawnRequest) any { return (*plainSpawnRequest)(v) })
		checkPacked(t, data, TypeSpawnResult, func(v *SpawnResult) any { return (*plainSpawnResult)(v) })
		checkPacked(t, data, TypeExecRequest, func(v *ExecRequest) any { return (*plainExecRequest)(v) })
		checkPacked(t, data, TypeExecResult, func(v *ExecResult) any { return (*plainExecResult)(v) })
	})
}

func checkPacked[T msgpack.CustomEncoder](t *testing.T, data []byte, typ Type, plain func(*T) any) {
	var v T
	if DecodeAs(data, typ, &v) != nil {
		return
	}
	encode := func(x any) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		if err := enc.Encode(x); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		return buf.Bytes()
	}
	if hand, want := encode(v), encode(plain(&v)); !bytes.Equal(hand, want) {
		t.Fatalf("%s: hand encoding differs from the reflective one:\n% x\n% x", typ, hand, want)
	}
}
