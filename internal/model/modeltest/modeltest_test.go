package modeltest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"hello, ant", []string{"hello, ", "ant"}},
		{`{"q":"sugar","limit":3}`, []string{`{"q":"su`, `gar","li`, `mit":3}`}},
		{"fourmis déjà", []string{"fourmis ", "déjà"}},
		{"ééééé", []string{"éééé", "é"}},
	} {
		if diff := cmp.Diff(tc.want, Split(tc.in)); diff != "" {
			t.Errorf("Split(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// Pieces put back together are the text; none is over 8 bytes unless it
// is one character, and none splits a character.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "hello, ant", `{"a":[1,2]}`, "ééééé", "\xff\xfe abc", "🐜🐜🐜"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pieces := Split(s)
		if got := strings.Join(pieces, ""); got != s {
			t.Fatalf("pieces %q join to %q", pieces, got)
		}
		for _, p := range pieces {
			if p == "" {
				t.Fatalf("empty piece in %q", pieces)
			}
			if len(p) > 8 && utf8.RuneCountInString(p) > 1 {
				t.Fatalf("piece %q is over 8 bytes", p)
			}
			if utf8.ValidString(s) && !utf8.ValidString(p) {
				t.Fatalf("piece %q splits a character of %q", p, s)
			}
		}
	})
}
