package model_test

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/model"
)

// Args cross the wire as msgpack, which decodes each integer into the
// smallest type that holds it; Float must read every one of them.
func TestArgsFloatAfterMsgpack(t *testing.T) {
	for _, n := range []int64{0, 7, 200, -7, -200, 300, -300, 70000, -70000, 5_000_000_000, -5_000_000_000} {
		b, err := msgpack.Marshal(model.Args{"k": n})
		if err != nil {
			t.Fatal(err)
		}
		var got model.Args
		if err := msgpack.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if f, ok := got.Float("k"); !ok || f != float64(n) {
			t.Errorf("%d decoded as %T: Float = %v, %v", n, got["k"], f, ok)
		}
	}
}
