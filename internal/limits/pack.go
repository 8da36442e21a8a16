package limits

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/pack"
)

// Pack writes b as its msgpack tags describe (see package pack).
func (b *Budget) Pack(w *pack.Writer) {
	w.Map(pack.Count(b.Tokens != 0, b.InputTokens != 0, b.OutputTokens != 0, b.Duration != 0, b.Spawns != 0))
	w.OptInt64("tokens", b.Tokens)
	w.OptInt64("input_tokens", b.InputTokens)
	w.OptInt64("output_tokens", b.OutputTokens)
	w.OptInt64("duration", int64(b.Duration))
	w.OptInt("spawns", b.Spawns)
}

// PackOpt writes b under key k unless it is zero (an omitempty field).
func (b *Budget) PackOpt(w *pack.Writer, k string) {
	if !b.IsZero() {
		w.Key(k)
		b.Pack(w)
	}
}

var _ msgpack.CustomEncoder = Grant{}

// EncodeMsgpack writes g as its msgpack tags describe (see package pack):
// every placement carries one.
func (g Grant) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := pack.Writer{Enc: enc}
	g.Pack(&w)
	return w.Err
}

// Pack writes g as its msgpack tags describe.
func (g *Grant) Pack(w *pack.Writer) {
	w.Map(3 + pack.Count(g.Remaining != 0, g.Spent != nil))
	w.Int64("tokens", g.Tokens)
	w.Int64("input_tokens", g.InputTokens)
	w.Int64("output_tokens", g.OutputTokens)
	w.OptInt64("remaining", int64(g.Remaining))
	if g.Spent != nil {
		w.Key("spent")
		w.Value(g.Spent)
	}
}
