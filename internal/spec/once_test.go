package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAtMostOnceParsed(t *testing.T) {
	f, err := Parse([]byte("name: a\nharness: {at_most_once: [bash, 'mcp__pay__*'], in_doubt: ask}\nhelper: {at_most_once: [write_file]}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := &f.Harness
	for tool, want := range map[string]bool{
		"bash": true, "mcp__pay__charge": true, "mcp__pay__refund": true,
		"mcp__payroll__run": false, "mcp__search__pay": false, "read_file": false, "write_file": false,
	} {
		if got := h.OnceOnly(tool); got != want {
			t.Errorf("OnceOnly(%q) = %v, want %v", tool, got, want)
		}
	}
	if !h.AsksInDoubt() {
		t.Error("in_doubt: ask does not ask")
	}
	if (&Harness{}).AsksInDoubt() || (&Harness{InDoubt: InDoubtReport}).AsksInDoubt() {
		t.Error("report (or nothing) asks")
	}
}

func TestAtMostOnceValidation(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"bad glob", "name: a\nharness: {at_most_once: ['mcp__pay__[']}\n",
			`a.yaml: harness.at_most_once[0]: tool name glob "mcp__pay__[": syntax error in pattern`},
		{"empty glob", "name: a\nharness: {at_most_once: [bash, '']}\n", "a.yaml: harness.at_most_once[1]: empty tool name glob"},
		{"glob twice", "name: a\nharness: {at_most_once: [bash, bash]}\n", `a.yaml: harness.at_most_once[1]: duplicate tool name glob "bash"`},
		{"helper's bad glob", "name: a\nagents: [{name: b, helper: {at_most_once: ['[']}}]\n",
			`a.yaml: agents[0].helper.at_most_once[0]: tool name glob "[": syntax error in pattern`},
		{"unknown in_doubt", "name: a\nharness: {in_doubt: retry}\n", `a.yaml: harness.in_doubt: "retry" is not report or ask`},
		{"misspelt key", "name: a\nharness: {at_most_one: [bash]}\n", `unknown key "at_most_one"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "a.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHelperKeepsAtMostOnce: a helper has its parent's at-most-once tools
// and its template's besides, and asks about calls in doubt when its
// parent does; a helper of that helper keeps them all.
func TestHelperKeepsAtMostOnce(t *testing.T) {
	parent := Agent{Name: "lead", Harness: Harness{AtMostOnce: []string{"bash"}, InDoubt: InDoubtAsk},
		Helper: Helper{AtMostOnce: []string{"mcp__pay__*", "bash"}}}
	kid := HelperSpec(parent, "kid")
	if diff := cmp.Diff([]string{"bash", "mcp__pay__*"}, kid.Harness.AtMostOnce); diff != "" {
		t.Errorf("helper's at_most_once (-want +got):\n%s", diff)
	}
	if !kid.Harness.AsksInDoubt() {
		t.Error("the helper does not ask about calls in doubt; its parent does")
	}
	if diff := cmp.Diff(kid.Harness.AtMostOnce, HelperSpec(kid, "grandkid").Harness.AtMostOnce); diff != "" {
		t.Errorf("a helper's helper changed the list (-kid +grandkid):\n%s", diff)
	}
	kid.Harness.AtMostOnce[0] = "changed"
	if parent.Harness.AtMostOnce[0] != "bash" {
		t.Error("changing the helper's list changed the parent's")
	}
}

func TestAddOnceNeverRemoves(t *testing.T) {
	h := Harness{AtMostOnce: []string{"bash"}, InDoubt: InDoubtAsk}
	h.AddOnce(&Harness{AtMostOnce: []string{"mcp__pay__*"}, InDoubt: InDoubtReport})
	h.AddOnce(&Harness{})
	if diff := cmp.Diff(Harness{AtMostOnce: []string{"bash", "mcp__pay__*"}, InDoubt: InDoubtAsk}, h); diff != "" {
		t.Errorf("AddOnce (-want +got):\n%s", diff)
	}
}
