package limits

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// Kind names one quantity a budget bounds.
type Kind string

// The budget kinds.
const (
	KindTokens       Kind = "tokens"        // input + output tokens, summed over the tree
	KindInputTokens  Kind = "input_tokens"  // input tokens, summed over the tree
	KindOutputTokens Kind = "output_tokens" // output tokens, summed over the tree
	KindDuration     Kind = "duration"      // wall time since the run (or helper) started
	KindSpawns       Kind = "spawns"        // helpers ever started in the tree
	KindUSD          Kind = "usd"           // the cost of the model calls in US dollars, summed over the tree
)

// Budget bounds a whole tree: a run, or one helper's subtree inside its
// parent's. Zero fields are unbounded.
type Budget struct {
	Tokens       int64         `json:"tokens,omitempty" yaml:"tokens,omitempty" msgpack:"tokens,omitempty"`
	InputTokens  int64         `json:"input_tokens,omitempty" yaml:"input_tokens,omitempty" msgpack:"input_tokens,omitempty"`
	OutputTokens int64         `json:"output_tokens,omitempty" yaml:"output_tokens,omitempty" msgpack:"output_tokens,omitempty"`
	Duration     time.Duration `json:"duration,omitempty" yaml:"duration,omitempty" msgpack:"duration,omitempty"`
	Spawns       int           `json:"spawns,omitempty" yaml:"spawns,omitempty" msgpack:"spawns,omitempty"`
	// USD bounds the cost of the tree's model calls, in US dollars, at the
	// prices of the workers that make them.
	USD float64 `json:"usd,omitempty" yaml:"usd,omitempty" msgpack:"usd,omitempty"`
}

// IsZero reports whether b bounds nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// Validate rejects negative amounts, and a usd amount that is not a number
// or too large to count in micro-dollars.
func (b Budget) Validate() error {
	if b.Tokens < 0 || b.InputTokens < 0 || b.OutputTokens < 0 || b.Duration < 0 || b.Spawns < 0 || b.USD < 0 {
		return fmt.Errorf("%w: budget amounts must not be negative", ErrBadConfig)
	}
	if math.IsNaN(b.USD) || b.USD > maxUSD {
		return fmt.Errorf("%w: budget.usd %v is not an amount of US dollars up to %v", ErrBadConfig, b.USD, float64(maxUSD))
	}
	return nil
}

// maxUSD is the largest usd budget: far below Unlimited micro-dollars.
const maxUSD = 1e9

// Micros is a usd budget's amount in micro-dollars (millionths of a US
// dollar), how the books count money: 0 for none, at least 1 for any
// positive amount.
func (b Budget) Micros() int64 {
	if !(b.USD > 0) {
		return 0
	}
	return max(ToMicros(min(b.USD, maxUSD)), 1)
}

// ToMicros is usd in micro-dollars, rounded to the nearest.
func ToMicros(usd float64) int64 {
	if !(usd > 0) {
		return 0
	}
	return int64(math.Round(usd * 1e6))
}

// Dollars is micros micro-dollars in US dollars.
func Dollars(micros int64) float64 { return float64(micros) / 1e6 }

// FormatUSD writes micros micro-dollars as dollars with two decimals, or
// up to four where cents would round it: "$1.02", "$0.0123", "$0.905".
func FormatUSD(micros int64) string {
	s := strconv.FormatFloat(Dollars(micros), 'f', 4, 64)
	s = strings.TrimRight(s, "0")
	if i := strings.IndexByte(s, '.'); len(s)-i-1 < 2 {
		s += strings.Repeat("0", 2-(len(s)-i-1))
	}
	return "$" + s
}

// Spend is what model calls spent: their input and output tokens, and
// their cost in micro-dollars.
type Spend struct {
	In, Out int64
	Micros  int64
}

// SpendOf is what the calls of usage u spent; negative counts are none.
func SpendOf(u model.Usage) Spend {
	return Spend{In: max(u.InputTokens, 0), Out: max(u.OutputTokens, 0), Micros: ToMicros(u.CostUSD)}
}

// Less is s without o: what a tree spent beyond its root's own calls.
func (s Spend) Less(o Spend) Spend {
	return Spend{In: s.In - o.In, Out: s.Out - o.Out, Micros: s.Micros - o.Micros}
}

// Usage is s as a model.Usage: tokens and cost (in dollars).
func (s Spend) Usage() model.Usage {
	return model.Usage{InputTokens: s.In, OutputTokens: s.Out, CostUSD: Dollars(s.Micros)}
}

// Exhausted says a budget is spent. Its Error is the reason a thread fails
// with ("budget exhausted (tokens)"); Detail is the run's error, with the
// amount used and the limit of the budget that was spent.
type Exhausted struct {
	Kind        Kind
	Used, Limit int64 // tokens or spawns; nanoseconds for KindDuration; micro-dollars for KindUSD
}

func (e *Exhausted) Error() string { return "budget exhausted (" + string(e.Kind) + ")" }

// Detail is "budget exhausted (<kind>): <used>/<limit>".
func (e *Exhausted) Detail() string {
	if e.Kind == KindDuration {
		return fmt.Sprintf("%s: %s/%s", e.Error(), time.Duration(e.Used).Round(time.Millisecond), time.Duration(e.Limit))
	}
	if e.Kind == KindUSD {
		return fmt.Sprintf("%s: %s/%s", e.Error(), FormatUSD(e.Used), FormatUSD(e.Limit))
	}
	return fmt.Sprintf("%s: %d/%d", e.Error(), e.Used, e.Limit)
}

// BudgetMessage is the tool result of a spawn refused because a budget is spent.
func BudgetMessage(k Kind) string {
	return "Agent budget exhausted (" + string(k) + "). Solve the task yourself."
}

// Amount is how much of one budget kind was used, against its limit.
// Durations are in milliseconds, money in micro-dollars (in JSON, a Use
// shows money in US dollars).
type Amount struct {
	Used  int64 `json:"used" msgpack:"used"`
	Limit int64 `json:"limit" msgpack:"limit"`
}

// Use is a budget's use per kind; only bounded kinds are present.
type Use map[Kind]Amount

// usdAmount is a usd Amount in JSON: US dollars.
type usdAmount struct {
	Used  float64 `json:"used"`
	Limit float64 `json:"limit"`
}

// MarshalJSON writes u with its usd amount in US dollars
// ({"usd": {"used": 0.99, "limit": 1}}), every other kind as it counts.
func (u Use) MarshalJSON() ([]byte, error) {
	if u == nil {
		return []byte("null"), nil
	}
	out := make(map[Kind]any, len(u))
	for k, a := range u {
		if k == KindUSD {
			out[k] = usdAmount{Used: Dollars(a.Used), Limit: Dollars(a.Limit)}
		} else {
			out[k] = a
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (u *Use) UnmarshalJSON(data []byte) error {
	var raw map[Kind]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		*u = nil
		return nil
	}
	out := make(Use, len(raw))
	for k, v := range raw {
		if k == KindUSD {
			var d usdAmount
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out[k] = Amount{Used: ToMicros(d.Used), Limit: ToMicros(d.Limit)}
			continue
		}
		var a Amount
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		out[k] = a
	}
	*u = out
	return nil
}

// Override returns b with every amount o sets replacing b's: a
// submission's budget flags over the budget of its spec.
func (b Budget) Override(o Budget) Budget {
	setNonZero(&b.Tokens, o.Tokens)
	setNonZero(&b.InputTokens, o.InputTokens)
	setNonZero(&b.OutputTokens, o.OutputTokens)
	setNonZero(&b.Duration, o.Duration)
	setNonZero(&b.Spawns, o.Spawns)
	setNonZero(&b.USD, o.USD)
	return b
}

// setNonZero sets *dst to v unless v is zero.
func setNonZero[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}
