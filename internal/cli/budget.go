package cli

import (
	"flag"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/limits"
)

// budgetFlags are the budget flags of `formica run` and `formica submit`;
// amounts they set override the agent spec's budget.
type budgetFlags struct{ b limits.Budget }

func (f *budgetFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.b.Tokens, "budget-tokens", 0, "tokens (input + output) the whole tree may spend (0: unbounded)")
	fs.DurationVar(&f.b.Duration, "budget-duration", 0, "wall time the whole tree may take before its model calls and spawns stop (0: unbounded)")
	fs.Float64Var(&f.b.USD, "budget-usd", 0, "US dollars the whole tree's model calls may cost, at the prices (--prices) of the workers that make them; each call's estimated cost is reserved before it is sent (0: unbounded)")
	fs.IntVar(&f.b.Spawns, "budget-spawns", 0, "helpers the whole tree may ever start (0: the coordinator's --max-spawns)")
}

// body is the budget as a submission carries it; nil when it bounds
// nothing.
func (f *budgetFlags) body() *api.BudgetBody {
	if f.b.IsZero() {
		return nil
	}
	b := &api.BudgetBody{Tokens: f.b.Tokens, InputTokens: f.b.InputTokens, OutputTokens: f.b.OutputTokens,
		Spawns: f.b.Spawns, USD: f.b.USD}
	if f.b.Duration != 0 {
		b.Duration = f.b.Duration.String()
	}
	return b
}
