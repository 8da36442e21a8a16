package tools

import "testing"

func TestDeniedText(t *testing.T) {
	if got := DeniedText("bash"); got != "Tool call denied by permission policy: bash" {
		t.Errorf("got %q", got)
	}
}
