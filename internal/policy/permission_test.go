package policy

import "testing"

func TestPolicyFirstMatchWins(t *testing.T) {
	p := Permission{
		Default: Ask,
		Rules: []Rule{
			{Tool: "bash", Match: "rm *", Decision: Deny},
			{Tool: "bash", Match: "git *", Decision: Allow},
			{Tool: "read_*", Decision: Allow},
			{Tool: "write_file", Match: "src/*", Decision: Allow},
		},
	}
	tests := []struct {
		tool, subject string
		want          Decision
	}{
		{"bash", "rm -rf /", Deny},
		{"bash", "git status", Allow},
		{"bash", "gitk", Ask},
		{"bash", "ls", Ask},
		{"read_file", "a.txt", Allow},
		{"write_file", "src/deep/x.go", Allow},
		{"write_file", "main.go", Ask},
		{"write_file", "", Ask}, // a rule with Match never matches a call without subject
		{"glob", "*", Ask},
	}
	for _, tt := range tests {
		if got := p.Decide(tt.tool, tt.subject); got != tt.want {
			t.Errorf("Decide(%q, %q) = %s, want %s", tt.tool, tt.subject, got, tt.want)
		}
	}
	if got := (Permission{}).Decide("bash", "x"); got != Allow {
		t.Errorf("zero policy = %s, want allow", got)
	}
}

func TestPermissionsNarrowNeverWiden(t *testing.T) {
	parent := Permissions{{Default: Allow, Rules: []Rule{{Tool: "bash", Decision: Ask}, {Tool: "write_file", Decision: Deny}}}}
	child := parent.Narrow(Permission{Default: Allow, Rules: []Rule{
		{Tool: "bash", Decision: Allow},       // tries to widen ask -> allow
		{Tool: "write_file", Decision: Allow}, // tries to widen deny -> allow
		{Tool: "read_file", Decision: Deny},   // narrows
	}})
	for tool, want := range map[string]Decision{"bash": Ask, "write_file": Deny, "read_file": Deny, "glob": Allow} {
		if got := child.Decide(tool, ""); got != want {
			t.Errorf("%s: got %s, want %s", tool, got, want)
		}
	}
	if len(parent) != 1 {
		t.Error("Narrow changed the parent's stack")
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := []Permission{
		{Default: "maybe"},
		{Rules: []Rule{{Tool: "", Decision: Allow}}},
		{Rules: []Rule{{Tool: "[", Decision: Allow}}},
		{Rules: []Rule{{Tool: "bash", Decision: "sure"}}},
	}
	for i, p := range bad {
		if err := p.Validate(); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	if err := (Permission{Default: Deny, Rules: []Rule{{Tool: "*", Match: "x*", Decision: Ask}}}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*c", "abbbc", true}, {"a*c", "abcd", false}, {"src/*", "src/a/b.go", true},
		{"go test*", "go test ./...", true}, {"?", "ab", false}, {"a?c", "abc", true}, {"*.go", "x/y.go", true},
	} {
		if got := globMatch(tt.p, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v", tt.p, tt.s, got)
		}
	}
}
