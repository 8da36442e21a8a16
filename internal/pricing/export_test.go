package pricing

import "github.com/formica-run/formica/internal/model"

// Priced returns u, one call of the model ref names, with its cost:
// CostUSD at the ref's price and Priced 1, or Unpriced 1 when it has none.
func (t *Table) Priced(ref string, u model.Usage) model.Usage {
	p, ok := t.Lookup(ref)
	return Apply(p, ok, u)
}
