package model

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
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
	switch v := reflect.ValueOf(a[key]); {
	case v.CanFloat():
		return v.Float(), true
	case v.CanInt():
		return float64(v.Int()), true
	case v.CanUint():
		return float64(v.Uint()), true
	}
	if n, ok := a[key].(json.Number); ok {
		f, err := n.Float64()
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

// Keys returns the keys sorted, so that the first bad arg a provider
// reports is the same on every run.
func (a Args) Keys() []string { return slices.Sorted(maps.Keys(a)) }

// Number returns the value of key as a finite number, or an error saying
// what key holds instead.
func (a Args) Number(key string) (float64, error) {
	f, ok := a.Float(key)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("arg %q: want a number, got %T", key, a[key])
	}
	return f, nil
}

// Integer returns the value of key as an integer a float64 holds exactly,
// or an error saying what key holds instead.
func (a Args) Integer(key string) (int64, error) {
	f, ok := a.Float(key)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("arg %q: want an integer, got %v", key, a[key])
	}
	return int64(f), nil
}

// Strings returns the value of key, a string or a list of strings, as a
// list, or an error saying what key holds instead.
func (a Args) Strings(key string) ([]string, error) {
	switch s := a[key].(type) {
	case string:
		return []string{s}, nil
	case []string:
		return s, nil
	case []any:
		out := make([]string, 0, len(s))
		for _, e := range s {
			str, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("arg %q: want strings, got %T", key, e)
			}
			out = append(out, str)
		}
		return out, nil
	}
	return nil, fmt.Errorf("arg %q: want a string or a list of strings, got %T", key, a[key])
}
