package spec

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/pack"
	"github.com/formica-run/formica/internal/pack/packtest"
	"github.com/formica-run/formica/internal/policy"
)

// plainAgent is an Agent without its encoder: the reflective reference.
type plainAgent Agent

// TestPackMatchesTheTags: an agent spec writes itself byte for byte as the
// reflective encoder writes it (so its content hash is unchanged): zero,
// with every field set, with each field set alone, and with a harness whose
// base tools are none (an empty list, not nil).
func TestPackMatchesTheTags(t *testing.T) {
	each, full := packtest.Leaves[Agent](t)
	if len(each) < 37 {
		t.Fatalf("found %d leaf fields of a spec; the filler misses some", len(each))
	}
	none := Agent{Name: "n", Harness: Harness{Tools: []string{}}}
	rule := Agent{Harness: Harness{Permissions: policy.Permission{Rules: []policy.Rule{{Tool: "bash", Decision: policy.Allow}}}}}
	cases := append([]Agent{{}, full, none, rule, HelperSpec(full, "h")}, each...)
	packtest.MatchesReflective(t, cases, (*Agent).Pack, func(a *Agent) any { return (*plainAgent)(a) })
	for i := range cases {
		got, err := msgpack.Marshal(cases[i])
		if err != nil {
			t.Fatal(err)
		}
		want, _ := msgpack.Marshal((*plainAgent)(&cases[i]))
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: EncodeMsgpack differs from the reflective encoding", i)
		}
	}
}

func BenchmarkEncodeAgent(b *testing.B) {
	_, full := packtest.Leaves[Agent](b)
	a := HelperSpec(full, "h")
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			w := pack.Writer{Enc: enc}
			a.Pack(&w)
		}
	})
	b.Run("reflective", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode((*plainAgent)(&a))
		}
	})
}
