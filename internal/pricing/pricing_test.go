package pricing_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/pricing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestCost(t *testing.T) {
	cached, write := 0.30, 3.75
	p := pricing.Price{Input: 3, CachedInput: &cached, CacheWrite: &write, Output: 15}
	for _, tc := range []struct {
		name string
		u    model.Usage
		want float64
	}{
		{"no cache", model.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}, 3 + 1.5},
		{"cached parts at their prices", model.Usage{InputTokens: 10_000, CacheReadTokens: 6_000, CacheWriteTokens: 3_000, OutputTokens: 500},
			(1_000*3 + 6_000*0.30 + 3_000*3.75 + 500*15) / 1e6},
		{"cached parts clamped to the input", model.Usage{InputTokens: 100, CacheReadTokens: 80, CacheWriteTokens: 80},
			(80*0.30 + 20*3.75) / 1e6},
		{"nothing", model.Usage{}, 0},
	} {
		if got := p.Cost(tc.u); !near(got, tc.want) {
			t.Errorf("%s: cost %v, want %v", tc.name, got, tc.want)
		}
	}
	// Without cached prices, cached input costs the input price.
	plain := pricing.Price{Input: 2, Output: 8}
	if got, want := plain.Cost(model.Usage{InputTokens: 1000, CacheReadTokens: 900, CacheWriteTokens: 100, OutputTokens: 10}), (1000*2.0+10*8)/1e6; !near(got, want) {
		t.Errorf("cost without cached prices %v, want %v", got, want)
	}
}

func TestLookup(t *testing.T) {
	tab, err := pricing.Parse([]byte(`
gpt-4o: {input: 1, output: 2}           # overrides the default
"openai:gpt-4o-mini": {input: 9, output: 9}
fast/llama-3: {input: 0.5, output: 0.5}
llama-3: {input: 0.7, output: 0.7}
sim: {input: 0, output: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref   string
		input float64
		ok    bool
	}{
		{"openai:gpt-4o", 1, true},                        // the file over the default
		{"fast/gpt-4o", 1, true},                          // a model name prices it on any endpoint
		{"openai:gpt-4o-2024-08-06", 1, true},             // a dated name takes its base's price
		{"openai:gpt-4o-mini", 9, true},                   // a ref's own entry
		{"other/gpt-4o-mini", 0.15, true},                 // elsewhere the default
		{"fast/llama-3", 0.5, true},                       // the ref wins over the model name
		{"slow/llama-3", 0.7, true},                       // the model name
		{"anthropic:claude-sonnet-4-5-20250929", 3, true}, // a default, dated
		{"sim", 0, true},
		{"openai:gpt-4o-mini-tts", 0, false}, // no prefix matching beyond dates
		{"openai:unknown-model", 0, false},
		{"scripted:/tmp/x.yaml", 0, false},
		{"", 0, false},
	} {
		p, ok := tab.Lookup(tc.ref)
		if ok != tc.ok || p.Input != tc.input {
			t.Errorf("Lookup(%q) = %+v, %v; want input %v, %v", tc.ref, p, ok, tc.input, tc.ok)
		}
	}
	if _, ok := pricing.Defaults().Lookup("sim"); ok {
		t.Error("sim has a default price")
	}
	var none *pricing.Table
	if p, ok := none.Lookup("openai:gpt-4o"); !ok || p.Input != 2.5 {
		t.Errorf("a nil table's gpt-4o = %+v, %v; want the default", p, ok)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	yamlFile := write("prices.yaml", "my-model:\n  input: 0.5\n  cached_input: 0.05\n  cache_write: 0.6\n  output: 1.5\n")
	jsonFile := write("prices.json", `{"my-model": {"input": 0.5, "cached_input": 0.05, "cache_write": 0.6, "output": 1.5}}`)
	u := model.Usage{InputTokens: 2_000_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 500_000, OutputTokens: 1_000_000}
	want := 0.5*0.5 + 1*0.05 + 0.5*0.6 + 1*1.5
	for _, path := range []string{yamlFile, jsonFile} {
		tab, err := pricing.Load(path)
		if err != nil {
			t.Fatalf("Load(%s): %v", filepath.Base(path), err)
		}
		got := tab.Priced("openai:my-model", u)
		if got.Unpriced != 0 || !near(got.CostUSD, want) {
			t.Errorf("%s: priced usage %+v, want cost %v", filepath.Base(path), got, want)
		}
		if _, ok := tab.Lookup("anthropic:claude-haiku-4-5"); !ok {
			t.Errorf("%s: the defaults are gone", filepath.Base(path))
		}
	}
	if tab, err := pricing.Load(""); err != nil || tab == nil {
		t.Errorf("Load(\"\") = %v, %v; want the defaults", tab, err)
	}
	if tab, err := pricing.Load(write("empty.yaml", "")); err != nil {
		t.Errorf("an empty file: %v", err)
	} else if _, ok := tab.Lookup("openai:gpt-4o"); !ok {
		t.Error("an empty file lost the defaults")
	}
	for name, text := range map[string]string{
		"unknown field":  `{"m": {"input": 1, "output": 1, "cached": 1}}`,
		"negative price": "m: {input: -1, output: 1}",
		"not a number":   "m: {input: cheap, output: 1}",
		"empty key":      `{"": {"input": 1, "output": 1}}`,
		"not a mapping":  "[1, 2]",
	} {
		if _, err := pricing.Load(write("bad.yaml", text)); !errors.Is(err, pricing.ErrPricesFile) {
			t.Errorf("%s: Load = %v, want ErrPricesFile", name, err)
		}
	}
	if _, err := pricing.Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, pricing.ErrPricesFile) {
		t.Errorf("a missing file: %v, want ErrPricesFile", err)
	}
}

func TestPriced(t *testing.T) {
	tab := pricing.Defaults()
	u := model.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}
	if got := tab.Priced("openai:gpt-4o", u); got.Unpriced != 0 || got.Priced != 1 || !near(got.CostUSD, 12.5) || got.Cost() == nil {
		t.Errorf("gpt-4o: %+v, want $12.50", got)
	}
	got := tab.Priced("sim", u)
	if got.Unpriced != 1 || got.CostUSD != 0 || got.Cost() != nil {
		t.Errorf("sim: %+v, want unpriced", got)
	}
	// A sum with one unpriced call has no cost; a sum of priced ones does.
	sum := tab.Priced("openai:gpt-4o", u).Add(tab.Priced("openai:gpt-4o-mini", u))
	if c := sum.Cost(); c == nil || !near(*c, 12.5+0.75) {
		t.Errorf("sum of priced calls: %+v", sum)
	}
	if c := sum.Add(got).Cost(); c != nil {
		t.Errorf("sum with an unpriced call costs %v, want nil", *c)
	}
}
