package limits

import (
	"fmt"
	"time"
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
)

// Budget bounds a whole tree: a run, or one helper's subtree inside its
// parent's. Zero fields are unbounded.
type Budget struct {
	Tokens       int64         `json:"tokens,omitempty" yaml:"tokens,omitempty" msgpack:"tokens,omitempty"`
	InputTokens  int64         `json:"input_tokens,omitempty" yaml:"input_tokens,omitempty" msgpack:"input_tokens,omitempty"`
	OutputTokens int64         `json:"output_tokens,omitempty" yaml:"output_tokens,omitempty" msgpack:"output_tokens,omitempty"`
	Duration     time.Duration `json:"duration,omitempty" yaml:"duration,omitempty" msgpack:"duration,omitempty"`
	Spawns       int           `json:"spawns,omitempty" yaml:"spawns,omitempty" msgpack:"spawns,omitempty"`
}

// IsZero reports whether b bounds nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// Validate rejects negative amounts.
func (b Budget) Validate() error {
	if b.Tokens < 0 || b.InputTokens < 0 || b.OutputTokens < 0 || b.Duration < 0 || b.Spawns < 0 {
		return fmt.Errorf("%w: budget amounts must not be negative", ErrBadConfig)
	}
	return nil
}

// Exhausted says a budget is spent. Its Error is the reason a thread fails
// with ("budget exhausted (tokens)"); Detail is the run's error, with the
// amount used and the limit of the budget that was spent.
type Exhausted struct {
	Kind        Kind
	Used, Limit int64 // tokens or spawns; nanoseconds for KindDuration
}

func (e *Exhausted) Error() string { return "budget exhausted (" + string(e.Kind) + ")" }

// Detail is "budget exhausted (<kind>): <used>/<limit>".
func (e *Exhausted) Detail() string {
	if e.Kind == KindDuration {
		return fmt.Sprintf("%s: %s/%s", e.Error(), time.Duration(e.Used).Round(time.Millisecond), time.Duration(e.Limit))
	}
	return fmt.Sprintf("%s: %d/%d", e.Error(), e.Used, e.Limit)
}

// BudgetMessage is the tool result of a spawn refused because a budget is spent.
func BudgetMessage(k Kind) string {
	return "Agent budget exhausted (" + string(k) + "). Solve the task yourself."
}

// Amount is how much of one budget kind was used, against its limit.
// Durations are in milliseconds.
type Amount struct {
	Used  int64 `json:"used" msgpack:"used"`
	Limit int64 `json:"limit" msgpack:"limit"`
}

// Use is a budget's use per kind; only bounded kinds are present.
type Use map[Kind]Amount

// Override returns b with every amount o sets replacing b's: a
// submission's budget flags over the budget of its spec.
func (b Budget) Override(o Budget) Budget {
	if o.Tokens != 0 {
		b.Tokens = o.Tokens
	}
	if o.InputTokens != 0 {
		b.InputTokens = o.InputTokens
	}
	if o.OutputTokens != 0 {
		b.OutputTokens = o.OutputTokens
	}
	if o.Duration != 0 {
		b.Duration = o.Duration
	}
	if o.Spawns != 0 {
		b.Spawns = o.Spawns
	}
	return b
}
