package policy

import "github.com/formica-run/formica/internal/pack"

// IsEmpty reports whether p has neither default nor rules: what its
// omitempty fields leave out.
func (p *Permission) IsEmpty() bool { return p.Default == "" && len(p.Rules) == 0 }

// Pack writes p as its msgpack tags describe (see package pack).
func (p *Permission) Pack(w *pack.Writer) {
	w.Map(pack.Count(p.Default != "", len(p.Rules) > 0))
	w.OptStr("default", string(p.Default))
	if len(p.Rules) == 0 {
		return
	}
	w.Key("rules")
	w.Check(w.Enc.EncodeArrayLen(len(p.Rules)))
	for _, r := range p.Rules {
		w.Map(2 + pack.Count(r.Match != ""))
		w.Str("tool", r.Tool)
		w.OptStr("match", r.Match)
		w.Str("decision", string(r.Decision))
	}
}

// PackOpt writes p under key k unless it is empty (an omitempty field).
func (p *Permission) PackOpt(w *pack.Writer, k string) {
	if !p.IsEmpty() {
		w.Key(k)
		p.Pack(w)
	}
}

// Pack writes ps, nil as nil (see package pack).
func (ps Permissions) Pack(w *pack.Writer) {
	if ps == nil {
		w.Check(w.Enc.EncodeNil())
		return
	}
	w.Check(w.Enc.EncodeArrayLen(len(ps)))
	for i := range ps {
		ps[i].Pack(w)
	}
}
