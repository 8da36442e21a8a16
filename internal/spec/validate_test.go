package spec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

func TestParseValidationErrors(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"name required", "instructions: x\n", "a.yaml: name: required"},
		{"name not one word", "name: two words\n",
			`a.yaml: name: "two words" is not one word of letters, digits, '-', '_' or '.' (1-64 chars)`},
		{"name too long", "name: " + strings.Repeat("x", 65) + "\n",
			`a.yaml: name: "` + strings.Repeat("x", 65) + `" is not one word of letters, digits, '-', '_' or '.' (1-64 chars)`},
		{"agents name required", "name: a\nagents: [{instructions: x}]\n", "a.yaml: agents[0].name: required"},
		{"duplicate name", "name: a\nagents: [{name: b}, {name: a}]\n",
			`a.yaml: agents[1].name: duplicate agent name "a" (also name)`},
		{"bad model", "name: a\nmodel: ':gpt'\n", `a.yaml: model: bad model reference: ":gpt" has no provider`},
		{"bad helper model", "name: a\nagents: [{name: b, helper: {model: ' '}}]\n",
			"a.yaml: agents[0].helper.model: bad model reference: empty model reference"},
		{"negative max_turns", "name: a\nmax_turns: -3\n", "a.yaml: max_turns: -3 is negative"},
		{"negative context_window", "name: a\ncontext_window: -1\n", "a.yaml: context_window: -1 is negative"},
		{"tiny context_window", "name: a\ncontext_window: 100\n",
			"a.yaml: context_window: 100 tokens is too small (at least 1024, or 0 for the model's default)"},
		{"tiny helper context_window", "name: a\nhelper: {context_window: 1023}\n",
			"a.yaml: helper.context_window: 1023 tokens is too small (at least 1024, or 0 for the model's default)"},
		{"empty tool", "name: a\ntools: [agent, '']\n", "a.yaml: tools[1]: empty tool name"},
		{"duplicate tool", "name: a\ntools: [agent, agent]\n", `a.yaml: tools[1]: duplicate tool "agent"`},
		{"harness tool", "name: a\nharness: {tools: ['']}\n", "a.yaml: harness.tools[0]: empty tool name"},
		{"bad default", "name: a\nharness: {permissions: {default: maybe}}\n",
			`a.yaml: harness.permissions.default: bad policy: decision "maybe" (want allow, ask or deny)`},
		{"rule decision", "name: a\nagents:\n  - name: b\n  - name: c\n    harness:\n      permissions:\n        rules: [{tool: bash, decision: sure}]\n",
			`a.yaml: agents[1].harness.permissions.rules[0].decision: bad policy: decision "sure" (want allow, ask or deny)`},
		{"rule tool", "name: a\nharness: {permissions: {rules: [{decision: allow}]}}\n",
			"a.yaml: harness.permissions.rules[0].tool: bad policy: required"},
		{"rule glob", "name: a\nharness: {permissions: {rules: [{tool: '[', decision: allow}]}}\n",
			`a.yaml: harness.permissions.rules[0].tool: bad policy: glob "[": syntax error in pattern`},
		{"bad policy", "name: a\nhelper: {tools: {policy: all}}\n",
			`a.yaml: helper.tools.policy: bad policy: tool policy "all" (want inherit, override or restrict)`},
		{"only without restrict", "name: a\nhelper: {tools: {policy: override, only: [x]}}\n",
			"a.yaml: helper.tools.only: only applies to policy restrict, not override"},
		{"only default policy", "name: a\nhelper: {tools: {only: [x]}}\n",
			"a.yaml: helper.tools.only: only applies to policy restrict, not inherit"},
		{"empty add", "name: a\nhelper: {tools: {add: ['']}}\n", "a.yaml: helper.tools.add[0]: empty tool name"},
		{"handoff unknown", "name: a\nhandoffs: [ghost]\n",
			`a.yaml: handoffs[0]: unknown agent "ghost" (handoffs name agents of this file)`},
		{"handoff self", "name: a\nagents: [{name: b, handoffs: [a, b]}]\n",
			`a.yaml: agents[0].handoffs[1]: agent "b" cannot hand off to itself`},
		{"handoff twice", "name: a\nhandoffs: [b, b]\nagents: [{name: b}]\n", `a.yaml: handoffs[1]: duplicate handoff "b"`},
		{"schema invalid", "name: a\noutput_schema: {type: string, minLength: -1}\n",
			"a.yaml: output_schema: not a valid JSON Schema: at '/minLength': minimum: got -1, want 0"},
		{"helper schema invalid", "name: a\nagents: [{name: b, helper: {output_schema: {minLength: -1}}}]\n",
			"a.yaml: agents[0].helper.output_schema: not a valid JSON Schema: at '/minLength': minimum: got -1, want 0"},
		{"schema external ref", "name: a\noutput_schema: {$ref: 'file:///etc/passwd'}\n",
			`a.yaml: output_schema: failing loading "file:///etc/passwd": external references are not allowed`},
		{"several at once", "max_turns: -1\nagents: [{name: a b}]\n",
			"a.yaml: name: required\na.yaml: max_turns: -1 is negative\n" +
				`a.yaml: agents[0].name: "a b" is not one word of letters, digits, '-', '_' or '.' (1-64 chars)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), "a.yaml")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %q\nwant %q", got, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error is not ErrInvalid")
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error has no FieldError")
			}
		})
	}
}

func TestValidateWrapsCauses(t *testing.T) {
	f := File{Agent: Agent{Name: "a", Model: ":x", Harness: Harness{Permissions: policy.Permission{Default: "nope"}}}}
	err := f.Validate()
	for _, target := range []error{ErrInvalid, model.ErrBadRef, policy.ErrBadPolicy} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "fix-bug_2.v1": true, strings.Repeat("a", 64): true,
		"": false, "a b": false, "a/b": false, "é": false, strings.Repeat("a", 65): false,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestCompileSchema(t *testing.T) {
	sch, err := CompileSchema([]byte(`{"type":"object","required":["a"],"properties":{"b":{"type":"string"}},"$defs":{"x":{"$ref":"#/properties/b"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = sch.Validate(map[string]any{"b": 1.0})
	if got, want := SchemaErrorText(err), "at '': missing property 'a'; at '/b': got number, want string"; got != want {
		t.Errorf("SchemaErrorText = %q, want %q", got, want)
	}
	if _, err := CompileSchema([]byte(`{`)); err == nil {
		t.Error("CompileSchema accepted bad JSON")
	}
}

func TestValidateSandbox(t *testing.T) {
	f, err := Parse([]byte("name: a\nharness:\n  sandbox: {network: true, cpu: 30s, memory: 512M, processes: 64, file_size: 1GiB, timeout: 2m}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, timeout, err := f.Harness.Sandbox.Limits()
	if err != nil || !f.Harness.Sandbox.Network || l.CPU != 30*time.Second || l.Memory != 512<<20 ||
		l.Processes != 64 || l.FileSize != 1<<30 || timeout != 2*time.Minute {
		t.Errorf("limits %+v, timeout %v, err %v", l, timeout, err)
	}
	_, err = Parse([]byte("name: a\nharness:\n  sandbox: {cpu: soon, memory: 5X, processes: -1, file_size: '0', timeout: -1s}\n"), "a.yaml")
	for _, want := range []string{
		`harness.sandbox.cpu: "soon" is not a duration`, `harness.sandbox.memory: "5X": unknown unit`,
		"harness.sandbox.processes: -1 is negative", `harness.sandbox.file_size: "0" is not a positive size`,
		`harness.sandbox.timeout: "-1s" is not positive`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	_, err = Parse([]byte("name: a\nharness:\n  sandbox: {netwrok: true}\n"), "a.yaml")
	if err == nil || !strings.Contains(err.Error(), `unknown key "netwrok"`) {
		t.Errorf("unknown key: %v", err)
	}
}
