package policy

import "testing"

func TestParseVisibility(t *testing.T) {
	for _, s := range []string{"", "inherit", "override", "restrict"} {
		if _, err := ParseVisibility(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParseVisibility("all"); err == nil {
		t.Error("accepted all")
	}
}
