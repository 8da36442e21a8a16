package wire

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/pack"
	"github.com/formica-run/formica/internal/pack/packtest"
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
