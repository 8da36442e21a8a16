package quota

import (
	"errors"
	"fmt"
)

// Limits is an endpoint's quota as its operator declared it (in a providers
// file, by these YAML names) and as a worker's quota asks carry it (by the
// msgpack names). Zero fields are not declared: the limiter learns them
// from the provider's answers.
type Limits struct {
	// RequestsPerMinute refills the request bucket continuously, at
	// RequestsPerMinute/60 a second.
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty" yaml:"requests_per_minute,omitempty" msgpack:"rpm,omitempty"`
	// Burst is the request bucket's capacity: how many requests may go at
	// once. Zero means RequestsPerMinute, as providers replenish a whole
	// minute's quota continuously.
	Burst int64 `json:"burst,omitempty" yaml:"burst,omitempty" msgpack:"burst,omitempty"`
	// TokensPerMinute bounds input plus output tokens, as OpenAI counts.
	TokensPerMinute int64 `json:"tokens_per_minute,omitempty" yaml:"tokens_per_minute,omitempty" msgpack:"tpm,omitempty"`
	// InputTokensPerMinute and OutputTokensPerMinute bound each kind
	// apart, as Anthropic counts.
	InputTokensPerMinute  int64 `json:"input_tokens_per_minute,omitempty" yaml:"input_tokens_per_minute,omitempty" msgpack:"itpm,omitempty"`
	OutputTokensPerMinute int64 `json:"output_tokens_per_minute,omitempty" yaml:"output_tokens_per_minute,omitempty" msgpack:"otpm,omitempty"`
	// InFlight bounds the calls under way at once.
	InFlight int64 `json:"in_flight,omitempty" yaml:"in_flight,omitempty" msgpack:"in_flight,omitempty"`
}

// ErrLimits reports declared limits that cannot be used.
var ErrLimits = errors.New("quota limits")

// Validate reports a negative limit, or a burst declared without the
// requests per minute that would refill it.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"requests_per_minute", l.RequestsPerMinute}, {"burst", l.Burst},
		{"tokens_per_minute", l.TokensPerMinute}, {"input_tokens_per_minute", l.InputTokensPerMinute},
		{"output_tokens_per_minute", l.OutputTokensPerMinute}, {"in_flight", l.InFlight},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is negative (%d)", ErrLimits, f.name, f.v)
		}
	}
	if l.Burst > 0 && l.RequestsPerMinute == 0 {
		return fmt.Errorf("%w: burst %d needs requests_per_minute", ErrLimits, l.Burst)
	}
	return nil
}

// IsZero reports whether l declares nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// Lower returns, field by field, the lower of the limits l and o declare:
// two callers declaring one endpoint differently both stay within their
// word. A field only one of them declares is kept; negative fields count
// as undeclared.
func (l Limits) Lower(o Limits) Limits {
	return Limits{
		RequestsPerMinute:     low(l.RequestsPerMinute, o.RequestsPerMinute),
		Burst:                 low(l.Burst, o.Burst),
		TokensPerMinute:       low(l.TokensPerMinute, o.TokensPerMinute),
		InputTokensPerMinute:  low(l.InputTokensPerMinute, o.InputTokensPerMinute),
		OutputTokensPerMinute: low(l.OutputTokensPerMinute, o.OutputTokensPerMinute),
		InFlight:              low(l.InFlight, o.InFlight),
	}
}

// low is the lower of the limits a and b that are set (positive); 0 if neither.
func low(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// clean returns l with negative fields undeclared.
func (l Limits) clean() Limits { return l.Lower(Limits{}) }
