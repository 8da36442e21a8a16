package ids

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"launch-1", true},
		{"A_b-9", true},
		{"0e3c2c7e-5a9b-4df0-9a55-3f4bd7d1a6b1", true},
		{strings.Repeat("x", Max), true},
		{strings.Repeat("x", Max+1), false},
		{"", false},
		{"two words", false},
		{"a=b", false},
		{"a.b", false},
		{"a/b", false},
		{"a*", false},
		{"a>", false},
		{"é", false},
		{"a\x00", false},
	} {
		err := Check(tc.id)
		if got := err == nil; got != tc.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if Valid(tc.id) != tc.ok {
			t.Errorf("Valid(%q) = %v, want %v", tc.id, !tc.ok, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", tc.id, err)
		}
	}
}
