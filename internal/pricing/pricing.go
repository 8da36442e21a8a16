// Package pricing says what a model call costs in US dollars: a price table
// of models, in US dollars per million tokens, read from a prices file over
// built-in defaults, and the arithmetic that turns a call's model.Usage into
// its cost.
//
// A prices file is YAML or JSON, one entry per model:
//
//	gpt-4o: {input: 2.50, cached_input: 1.25, output: 10.00}
//	claude-sonnet-4-5: {input: 3, cached_input: 0.30, cache_write: 3.75, output: 15}
//	fast/llama-3.1-70b: {input: 0.60, output: 0.60}    # one endpoint's model
//
// A key is the model name the provider knows ("gpt-4o"), which prices that
// model whichever endpoint serves it, or a full ref ("openai:gpt-4o",
// "fast/gpt-4o", "sim") to single out one endpoint; a ref's own entry wins
// over its model name's. A model name with a date suffix
// ("claude-sonnet-4-5-20250929", "gpt-4o-2024-08-06") takes the price of
// the name without it when it has none of its own.
package pricing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/formica-run/formica/internal/model"
)

// ErrPricesFile marks a prices file that cannot be read or is not valid.
var ErrPricesFile = errors.New("bad prices file")

// FlagUsage describes the --prices flag of every program that calls models.
const FlagUsage = "prices `file` (YAML or JSON): US dollars per million tokens of each model, {\"<model or ref>\": {\"input\": N, \"cached_input\": N, \"cache_write\": N, \"output\": N}}, over the built-in defaults"

// Price is a model's price in US dollars per million tokens.
type Price struct {
	// Input is the price of input tokens not read from or written to the
	// prompt cache.
	Input float64 `json:"input" yaml:"input"`
	// CachedInput is the price of input tokens read from the cache; unset,
	// the Input price.
	CachedInput *float64 `json:"cached_input,omitempty" yaml:"cached_input"`
	// CacheWrite is the price of input tokens written to the cache; unset,
	// the Input price.
	CacheWrite *float64 `json:"cache_write,omitempty" yaml:"cache_write"`
	// Output is the price of output tokens.
	Output float64 `json:"output" yaml:"output"`
}

// perMillion: prices are per million tokens.
const perMillion = 1e6

// Cost is what a call with usage u costs at p, in US dollars: the tokens
// read from the cache at the cached input price, those written to it at
// the cache write price, the rest of the input at the input price and the
// output at the output price. Counts are clamped so that the cached parts
// never exceed the input.
func (p Price) Cost(u model.Usage) float64 {
	in := max(u.InputTokens, 0)
	read := min(max(u.CacheReadTokens, 0), in)
	write := min(max(u.CacheWriteTokens, 0), in-read)
	rest := in - read - write
	cached, written := p.Input, p.Input
	if p.CachedInput != nil {
		cached = *p.CachedInput
	}
	if p.CacheWrite != nil {
		written = *p.CacheWrite
	}
	return (float64(rest)*p.Input + float64(read)*cached + float64(write)*written + float64(max(u.OutputTokens, 0))*p.Output) / perMillion
}

func (p Price) check() error {
	for _, v := range []struct {
		name string
		val  *float64
	}{{"input", &p.Input}, {"cached_input", p.CachedInput}, {"cache_write", p.CacheWrite}, {"output", &p.Output}} {
		if v.val != nil && (*v.val < 0 || math.IsNaN(*v.val) || math.IsInf(*v.val, 0)) {
			return fmt.Errorf("%s: %v is not a price", v.name, *v.val)
		}
	}
	return nil
}

// Table is a set of prices by model name or ref. Its methods are safe for
// concurrent use; a nil *Table knows the defaults.
type Table struct {
	prices map[string]Price
}

// Defaults returns the built-in prices: a few well-known models at their
// providers' list prices when this was written (see docs/models.md), which
// may be out of date; a prices file overrides them.
func Defaults() *Table { return &Table{prices: maps.Clone(defaults)} }

func f(v float64) *float64 { return &v }

// defaults are list prices in US dollars per million tokens. OpenAI bills
// no premium for writing its cache, so its models' cache writes cost the
// input price; Anthropic's five-minute cache writes cost 1.25 times it.
var defaults = map[string]Price{
	"gpt-4o":       {Input: 2.50, CachedInput: f(1.25), Output: 10.00},
	"gpt-4o-mini":  {Input: 0.15, CachedInput: f(0.075), Output: 0.60},
	"gpt-4.1":      {Input: 2.00, CachedInput: f(0.50), Output: 8.00},
	"gpt-4.1-mini": {Input: 0.40, CachedInput: f(0.10), Output: 1.60},
	"gpt-4.1-nano": {Input: 0.10, CachedInput: f(0.025), Output: 0.40},
	"gpt-5":        {Input: 1.25, CachedInput: f(0.125), Output: 10.00},
	"gpt-5-mini":   {Input: 0.25, CachedInput: f(0.025), Output: 2.00},
	"gpt-5-nano":   {Input: 0.05, CachedInput: f(0.005), Output: 0.40},
	"o3":           {Input: 2.00, CachedInput: f(0.50), Output: 8.00},
	"o4-mini":      {Input: 1.10, CachedInput: f(0.275), Output: 4.40},

	"claude-opus-4-5":   {Input: 5.00, CachedInput: f(0.50), CacheWrite: f(6.25), Output: 25.00},
	"claude-opus-4-1":   {Input: 15.00, CachedInput: f(1.50), CacheWrite: f(18.75), Output: 75.00},
	"claude-opus-4-0":   {Input: 15.00, CachedInput: f(1.50), CacheWrite: f(18.75), Output: 75.00},
	"claude-opus-4":     {Input: 15.00, CachedInput: f(1.50), CacheWrite: f(18.75), Output: 75.00}, // claude-opus-4-20250514
	"claude-sonnet-4-5": {Input: 3.00, CachedInput: f(0.30), CacheWrite: f(3.75), Output: 15.00},
	"claude-sonnet-4-0": {Input: 3.00, CachedInput: f(0.30), CacheWrite: f(3.75), Output: 15.00},
	"claude-sonnet-4":   {Input: 3.00, CachedInput: f(0.30), CacheWrite: f(3.75), Output: 15.00}, // claude-sonnet-4-20250514
	"claude-haiku-4-5":  {Input: 1.00, CachedInput: f(0.10), CacheWrite: f(1.25), Output: 5.00},
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: f(0.08), CacheWrite: f(1.00), Output: 4.00},
}

// Load reads a prices file over the defaults; path "" is the defaults.
func Load(path string) (*Table, error) {
	if path == "" {
		return Defaults(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPricesFile, err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse reads a prices file's content (YAML, or JSON, which YAML reads
// too) over the defaults: an entry of the file replaces a default of the
// same key whole. Unknown fields, negative prices and empty keys are errors.
func Parse(data []byte) (*Table, error) {
	var entries map[string]Price
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrPricesFile, err)
	}
	t := Defaults()
	// Sorted, the first bad entry is reported the same each time.
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		p := entries[k]
		key := strings.TrimSpace(k)
		if key == "" {
			return nil, fmt.Errorf("%w: an entry has an empty model name", ErrPricesFile)
		}
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrPricesFile, key, err)
		}
		t.prices[key] = p
	}
	return t, nil
}

// dated is a model name's date suffix: -20250929 or -2024-08-06.
var dated = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2})$`)

// Lookup returns the price of the model ref names: the entry of the ref
// itself ("openai:gpt-4o", "fast/gpt-4o", "sim"), else that of its model
// name, else that of its model name without a date suffix. ok is false
// when none has one.
func (t *Table) Lookup(ref string) (p Price, ok bool) {
	prices := defaults
	if t != nil {
		prices = t.prices
	}
	r, err := model.ParseRef(ref)
	if err != nil {
		return Price{}, false
	}
	if p, ok := prices[r.String()]; ok {
		return p, true
	}
	if r.Name == "" {
		return Price{}, false
	}
	if p, ok := prices[r.Name]; ok {
		return p, true
	}
	p, ok = prices[dated.ReplaceAllString(r.Name, "")]
	return p, ok
}

// Apply returns u, one call, with its cost at p, or marked unpriced when ok
// is false.
func Apply(p Price, ok bool, u model.Usage) model.Usage {
	u.CostUSD, u.Priced, u.Unpriced = 0, 0, 1
	if ok {
		u.CostUSD, u.Priced, u.Unpriced = p.Cost(u), 1, 0
	}
	return u
}
