package model

import (
	"encoding/json"
	"maps"
)

// Args are provider parameters such as temperature or max_tokens, in their
// JSON-decoded forms. Specs decoded from YAML or msgpack may hold integers.
type Args map[string]any

// Merge returns base with every key set in over replacing base's value.
// Neither input is modified.
func (base Args) Merge(over Args) Args {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(Args, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// Float returns the numeric value of key and whether it holds a number. Every
// integer width counts: msgpack decodes an integer into the smallest type that
// holds it (300 arrives as uint16).
func (a Args) Float(key string) (float64, bool) {
	switch v := a[key].(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case int32:
		return float64(v), true
	case int16:
		return float64(v), true
	case int8:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint32:
		return float64(v), true
	case uint16:
		return float64(v), true
	case uint8:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// MaxTokens returns the output token limit the args set (max_tokens, or
// max_completion_tokens as newer OpenAI models name it).
func (a Args) MaxTokens() (int64, bool) {
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if f, ok := a.Float(k); ok {
			return int64(f), true
		}
	}
	return 0, false
}
