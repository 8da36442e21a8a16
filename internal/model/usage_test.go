package model_test

import (
	"testing"

	"github.com/formica-run/formica/internal/model"
)

func TestUsageAddAndCost(t *testing.T) {
	a := model.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 60, CacheWriteTokens: 30, CostUSD: 0.5, Priced: 1}
	b := model.Usage{InputTokens: 50, OutputTokens: 5, CacheReadTokens: 40, CostUSD: 0.25, Priced: 1}
	want := model.Usage{InputTokens: 150, OutputTokens: 15, CacheReadTokens: 100, CacheWriteTokens: 30, CostUSD: 0.75, Priced: 2}
	if got := a.Add(b); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		name string
		u    model.Usage
		want *float64
	}{
		{"priced calls", want, ptr(0.75)},
		{"no call", model.Usage{}, ptr(0)},
		{"one call without a price", want.Add(model.Usage{InputTokens: 1, Unpriced: 1}), nil},
		{"tokens of calls never priced (an older record)", model.Usage{InputTokens: 10, OutputTokens: 5}, nil},
		{"priced at nothing", model.Usage{InputTokens: 10, Priced: 1}, ptr(0)},
	} {
		got := tc.u.Cost()
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: Cost = %v, want %v", tc.name, deref(got), deref(tc.want))
		}
	}
}

func ptr(f float64) *float64 { return &f }

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}
